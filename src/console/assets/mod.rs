//! The console's files, compiled into the binary.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::server::error::{ApiError, ApiPath, ErrorBody};

const INDEX_HTML: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const OVERVIEW_JS: &str = include_str!("overview.js");
const QUEUE_JS: &str = include_str!("queue.js");
const CHARTS_JS: &str = include_str!("charts.js");
const STYLE_CSS: &str = include_str!("style.css");
const ICON_SVG: &str = include_str!("icon.svg");

/// The page may run only its own script and style, and call only this
/// origin: a payload shown in it can never load or run anything.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The names `GET /ui/{asset}` serves.
pub const ASSETS: [&str; 6] = [
    "app.js",
    "charts.js",
    "overview.js",
    "queue.js",
    "style.css",
    "icon.svg",
];

fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /ui`: the console.
#[utoipa::path(get, path = "/ui", tag = "console", security(()),
    responses((status = 200, description = "The web console's page (HTML); it asks for the token, if one is set, and calls the API", content_type = "text/html")))]
pub async fn page() -> Response {
    file("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /ui/{asset}`: the console's script, style and icon.
#[utoipa::path(get, path = "/ui/{asset}", tag = "console", security(()),
    params(("asset" = String, Path, description = "app.js, charts.js, overview.js, queue.js, style.css or icon.svg")),
    responses((status = 200, description = "The file"),
        (status = 404, description = "unknown_asset: no such file", body = ErrorBody)))]
pub async fn asset(ApiPath(asset): ApiPath<String>) -> Response {
    match asset.as_str() {
        "app.js" => file("text/javascript; charset=utf-8", APP_JS),
        "overview.js" => file("text/javascript; charset=utf-8", OVERVIEW_JS),
        "queue.js" => file("text/javascript; charset=utf-8", QUEUE_JS),
        "charts.js" => file("text/javascript; charset=utf-8", CHARTS_JS),
        "style.css" => file("text/css; charset=utf-8", STYLE_CSS),
        "icon.svg" => file("image/svg+xml", ICON_SVG),
        _ => ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_asset",
            "no such console file",
        )
        .into_response(),
    }
}
