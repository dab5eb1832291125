//! Prometheus's text exposition format, parsed for the tests that read a
//! scrape.

use std::collections::BTreeMap;

use reqwest::StatusCode;

/// The series a histogram exports besides its name.
pub const HISTOGRAM_SUFFIXES: &[&str] = &["_bucket", "_sum", "_count"];

/// One sample line of a scrape.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the sample lines of the text exposition format (comments skipped).
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| parse_line(line).unwrap_or_else(|| panic!("unparsable line: {line}")))
        .collect()
}

pub fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = line[name_end..].chars();
    if line[name_end..].starts_with('{') {
        rest.next();
        loop {
            let mut key = String::new();
            // A key up to `=`; `}` closes the set (also after a trailing comma).
            loop {
                match rest.next()? {
                    '}' if key.trim().trim_start_matches(',').is_empty() => {
                        key.clear();
                        break;
                    }
                    '=' => break,
                    c => key.push(c),
                }
            }
            let key = key.trim().trim_start_matches(',').trim().to_string();
            if key.is_empty() {
                break;
            }
            if rest.next()? != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                match rest.next()? {
                    '\\' => match rest.next()? {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    '"' => break,
                    other => value.push(other),
                }
            }
            labels.insert(key, value);
        }
    }
    let value = rest.as_str().split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// Sum of the samples named `name` carrying every label in `filter`.
pub fn total(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> f64 {
    matching(samples, name, filter).map(|s| s.value).sum()
}

/// The one sample named `name` carrying the labels in `filter`, if any.
pub fn value(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> Option<f64> {
    matching(samples, name, filter).next().map(|s| s.value)
}

pub fn matching<'a>(
    samples: &'a [Sample],
    name: &'a str,
    filter: &'a [(&'a str, &'a str)],
) -> impl Iterator<Item = &'a Sample> + 'a {
    samples.iter().filter(move |s| {
        s.name == name
            && filter
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

/// True when `series` appears in `text`: as the name of a sample line, or
/// (for a name without a histogram suffix) in a `# TYPE` line.
pub fn exported(text: &str, samples: &[Sample], series: &str) -> bool {
    let suffixed = HISTOGRAM_SUFFIXES.iter().any(|s| series.ends_with(s));
    let typed = text.lines().any(|line| {
        line.strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_whitespace().next())
            == Some(series)
    });
    samples.iter().any(|s| s.name == series) || (!suffixed && typed)
}

pub async fn scrape(client: &reqwest::Client, url: &str) -> String {
    let response = client.get(url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "GET {url}");
    response.text().await.unwrap()
}
