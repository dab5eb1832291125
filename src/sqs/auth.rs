//! Signature Version 4 verification of SQS requests (the header form,
//! `Authorization: AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
//! Signature=…`), as AWS documents it: canonical request, string to sign,
//! the derived signing key, a 15-minute clock skew.
//!
//! Who is checked: with credentials configured (`[sqs.credentials]`, and
//! the daemon's `token` as the secret of `[sqs] token_access_key_id`),
//! every request must be signed by one of them. With none, any signature
//! (or none) is accepted, as ElasticMQ and LocalStack do: the daemon only
//! starts that way on a loopback address, or with `allow_insecure_bind`,
//! exactly as the `/v1` API serves without a token.
//!
//! The HMAC-SHA256 and SHA-256 are the RustCrypto crates'. What is written
//! here is SigV4's request canonicalization (no crate verifies SigV4 on the
//! server side without pulling in an AWS SDK) and the date arithmetic for
//! `X-Amz-Date` (a dozen lines; a calendar crate for one conversion is not
//! worth its weight).

use axum::http::{HeaderMap, Method, Uri};
use hmac::{Hmac, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use sha2::{Digest, Sha256};

use super::SqsSection;
use super::error::SqsError;

/// Largest difference between a request's `X-Amz-Date` and now, in seconds.
pub const CLOCK_SKEW_MAX_S: u64 = 15 * 60;

/// SigV4's URI encoding: everything but `A-Z a-z 0-9 - _ . ~` is escaped.
const SIGV4_ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The path's encoding: [`SIGV4_ESCAPED`] less `/`.
const PATH_ESCAPED: &AsciiSet = &SIGV4_ESCAPED.remove(b'/');

type HmacSha256 = Hmac<Sha256>;

/// The parts of a request a signature covers.
pub struct Signed<'a> {
    /// The method.
    pub method: &'a Method,
    /// The path and query as sent.
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The body.
    pub body: &'a [u8],
}

/// The parsed `Authorization` header.
struct Authorization<'a> {
    access_key_id: &'a str,
    scope_date: &'a str,
    scope: String,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

/// Checks `request` against the configured credentials (`token` is the
/// daemon's bearer token); `now_s` in seconds since the epoch.
pub fn verify(
    config: &SqsSection,
    token: Option<&str>,
    request: &Signed<'_>,
    now_s: u64,
) -> Result<(), SqsError> {
    let token_credential = token.map(|t| (config.token_access_key_id.as_str(), t));
    if config.credentials.is_empty() && token_credential.is_none() {
        return Ok(());
    }
    let header = request
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            SqsError::denied(
                "MissingAuthenticationToken",
                "Request is missing Authentication Token (hotq verifies SigV4 \"Authorization\" headers).",
            )
        })?;
    let authorization = parse_authorization(header)?;
    let secret = config
        .credentials
        .get(authorization.access_key_id)
        .map(String::as_str)
        .or_else(|| {
            token_credential
                .filter(|(id, _)| *id == authorization.access_key_id)
                .map(|(_, s)| s)
        })
        .ok_or_else(|| {
            SqsError::denied(
                "InvalidClientTokenId",
                "The security token included in the request is invalid.",
            )
        })?;
    let amz_date = header_value(request.headers, "x-amz-date").ok_or_else(|| {
        SqsError::denied(
            "IncompleteSignature",
            "The request must carry an X-Amz-Date header.",
        )
    })?;
    check_date(amz_date, authorization.scope_date, now_s)?;
    let canonical = canonical_request(request, &authorization.signed_headers)?;
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{}\n{}",
        authorization.scope,
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let key = signing_key(secret, &authorization.scope);
    let mut mac = HmacSha256::new_from_slice(&key).expect("HMAC takes any key length");
    mac.update(string_to_sign.as_bytes());
    let presented = hex::decode(authorization.signature).unwrap_or_default();
    // `verify_slice` compares in constant time.
    mac.verify_slice(&presented).map_err(|_| {
        SqsError::denied(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. \
             Check your AWS Secret Access Key and signing method.",
        )
    })
}

fn incomplete(what: &str) -> SqsError {
    SqsError::denied(
        "IncompleteSignature",
        format!("Authorization header is not a valid AWS4-HMAC-SHA256 signature: {what}"),
    )
}

fn parse_authorization(header: &str) -> Result<Authorization<'_>, SqsError> {
    let rest = header
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(|| incomplete("it must start with AWS4-HMAC-SHA256"))?;
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',').map(str::trim) {
        if let Some(v) = part.strip_prefix("Credential=") {
            credential = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            signature = Some(v);
        }
    }
    let credential = credential.ok_or_else(|| incomplete("no Credential"))?;
    let parts: Vec<&str> = credential.split('/').collect();
    let [access_key_id, date, region, service, terminator] = parts[..] else {
        return Err(incomplete(
            "Credential must be id/date/region/service/aws4_request",
        ));
    };
    if terminator != "aws4_request" || service != "sqs" {
        return Err(incomplete(
            "the credential scope must end in sqs/aws4_request",
        ));
    }
    let signed_headers: Vec<&str> = signed
        .ok_or_else(|| incomplete("no SignedHeaders"))?
        .split(';')
        .collect();
    if !signed_headers.contains(&"host") {
        return Err(incomplete("SignedHeaders must include host"));
    }
    Ok(Authorization {
        access_key_id,
        scope_date: date,
        scope: format!("{date}/{region}/{service}/{terminator}"),
        signed_headers,
        signature: signature.ok_or_else(|| incomplete("no Signature"))?,
    })
}

fn header_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Checks `X-Amz-Date` (`YYYYMMDDTHHMMSSZ`): within the skew of now and
/// on the credential scope's date.
fn check_date(amz_date: &str, scope_date: &str, now_s: u64) -> Result<(), SqsError> {
    let signed_s = parse_amz_date(amz_date).ok_or_else(|| {
        SqsError::denied(
            "IncompleteSignature",
            format!("X-Amz-Date {amz_date:?} is not YYYYMMDDTHHMMSSZ."),
        )
    })?;
    if !amz_date.starts_with(scope_date) {
        return Err(SqsError::denied(
            "SignatureDoesNotMatch",
            format!(
                "Date in Credential scope does not match YYYYMMDD from X-Amz-Date ({amz_date})."
            ),
        ));
    }
    if signed_s.abs_diff(now_s) > CLOCK_SKEW_MAX_S {
        return Err(SqsError::denied(
            "SignatureDoesNotMatch",
            format!(
                "Signature expired: {amz_date} is more than {CLOCK_SKEW_MAX_S} s away from the \
                 server's time ({now_s} s since the epoch)."
            ),
        ));
    }
    Ok(())
}

/// `YYYYMMDDTHHMMSSZ` as seconds since the epoch.
fn parse_amz_date(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.len() != 16 || bytes[8] != b'T' || bytes[15] != b'Z' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> { text.get(range)?.parse().ok() };
    let (year, month, day) = (number(0..4)?, number(4..6)?, number(6..8)?);
    let (hour, minute, second) = (number(9..11)?, number(11..13)?, number(13..15)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days from 1970-01-01 to year-month-day in the proleptic Gregorian
    // calendar (Howard Hinnant's `days_from_civil`).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hour * 3_600 + minute * 60 + second).ok()
}

fn canonical_request(request: &Signed<'_>, signed_headers: &[&str]) -> Result<String, SqsError> {
    // Non-S3 services sign the path as sent, encoded once more.
    let path = utf8_percent_encode(request.uri.path(), PATH_ESCAPED).to_string();
    let mut query: Vec<(String, String)> = request
        .uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let encode = |s: &str| {
                let decoded = percent_decode_str(s).decode_utf8_lossy().to_string();
                utf8_percent_encode(&decoded, SIGV4_ESCAPED).to_string()
            };
            (encode(k), encode(v))
        })
        .collect();
    query.sort();
    let query: Vec<String> = query.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut headers = String::new();
    for name in signed_headers {
        let values: Vec<String> = request
            .headers
            .get_all(*name)
            .iter()
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let body_hash = hex::encode(Sha256::digest(request.body));
    if let Some(claimed) = header_value(request.headers, "x-amz-content-sha256")
        && claimed != "UNSIGNED-PAYLOAD"
        && claimed != body_hash
    {
        return Err(SqsError::denied(
            "SignatureDoesNotMatch",
            "The provided x-amz-content-sha256 header does not match the body.",
        ));
    }
    Ok(format!(
        "{}\n{path}\n{}\n{headers}\n{}\n{body_hash}",
        request.method.as_str(),
        query.join("&"),
        signed_headers.join(";"),
    ))
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// SigV4's signing key: HMAC chain over the scope's date, region, service.
fn signing_key(secret: &str, scope: &str) -> Vec<u8> {
    let mut key = format!("AWS4{secret}").into_bytes();
    for part in scope.split('/') {
        key = hmac(&key, part);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amz_dates_convert_to_epoch_seconds() {
        assert_eq!(parse_amz_date("19700101T000000Z"), Some(0));
        assert_eq!(parse_amz_date("20150830T123600Z"), Some(1_440_938_160));
        assert_eq!(parse_amz_date("20240229T235959Z"), Some(1_709_251_199));
        assert_eq!(parse_amz_date("2024-02-29T23:59"), None);
        assert_eq!(parse_amz_date("20241301T000000Z"), None);
    }

    #[test]
    fn the_signing_key_matches_aws_documented_example() {
        // AWS's SigV4 documentation example: secret
        // wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, 20150830/us-east-1/iam.
        let key = signing_key(
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "20150830/us-east-1/iam/aws4_request",
        );
        assert_eq!(
            hex::encode(key),
            "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"
        );
    }
}
