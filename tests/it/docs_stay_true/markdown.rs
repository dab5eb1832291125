//! What the checks need from a Markdown file, read with pulldown-cmark (a
//! real CommonMark parser, so a link inside a code block is not a link and
//! a `#` inside a fence is not a heading): its links, its headings'
//! anchors, its inline code and its shell-like code blocks, each with the
//! line it starts on.

use std::collections::HashSet;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// A piece of a document and the line (1-based) it starts on.
#[derive(Debug, Clone)]
pub struct Located {
    pub text: String,
    pub line: usize,
}

/// The parts of one Markdown document the checks read.
#[derive(Debug, Default)]
pub struct Doc {
    /// Link and image destinations, as written.
    pub links: Vec<Located>,
    /// Heading texts, as rendered (code spans without their backticks).
    pub headings: Vec<String>,
    /// Inline code spans.
    pub code_spans: Vec<Located>,
    /// Fenced code blocks that hold shell commands (or systemd units);
    /// `line` is the block's first line of content.
    pub shell_blocks: Vec<Located>,
}

/// Fence languages whose lines are read as shell commands. An unnamed
/// fence is included: the docs show plain command lines in them.
const SHELL_FENCES: [&str; 6] = ["", "sh", "bash", "shell", "console", "ini"];

pub fn parse(source: &str) -> Doc {
    let mut doc = Doc::default();
    let mut heading: Option<String> = None;
    let mut block: Option<(bool, Located)> = None;
    let events = Parser::new_ext(source, Options::ENABLE_TABLES).into_offset_iter();
    for (event, range) in events {
        let line = line_of(source, range.start);
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => doc.headings.extend(heading.take()),
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                doc.links.push(Located {
                    text: dest_url.to_string(),
                    line,
                });
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                block = Some((
                    is_shell(&kind),
                    Located {
                        text: String::new(),
                        line: line + 1,
                    },
                ));
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((true, located)) = block.take() {
                    doc.shell_blocks.push(located);
                }
            }
            Event::Code(code) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&code);
                }
                doc.code_spans.push(Located {
                    text: code.to_string(),
                    line,
                });
            }
            Event::Text(text) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&text);
                } else if let Some((_, located)) = block.as_mut() {
                    located.text.push_str(&text);
                }
            }
            _ => {}
        }
    }
    doc
}

fn is_shell(kind: &CodeBlockKind) -> bool {
    match kind {
        CodeBlockKind::Fenced(info) => {
            SHELL_FENCES.contains(&info.split_whitespace().next().unwrap_or(""))
        }
        CodeBlockKind::Indented => false,
    }
}

fn line_of(source: &str, offset: usize) -> usize {
    source[..offset].bytes().filter(|&b| b == b'\n').count() + 1
}

/// The anchors GitHub gives a document's headings: lower case, spaces to
/// `-`, every character but letters, digits, `-` and `_` dropped; a
/// repeated anchor gets `-1`, `-2`, ….
pub fn anchors(doc: &Doc) -> HashSet<String> {
    let mut seen = HashSet::new();
    for heading in &doc.headings {
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    seen
}

pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn slugs_follow_githubs_rule() {
    assert_eq!(
        slug("4.2 The second level: counted requests and takeover"),
        "42-the-second-level-counted-requests-and-takeover"
    );
    assert_eq!(
        slug("Sizing `fulfill_batch_max` and `fulfill_bytes_max`"),
        "sizing-fulfill_batch_max-and-fulfill_bytes_max"
    );
    let doc = parse("# A\n\n## A\n\n```sh\n# not a heading\n```\n");
    let anchors = anchors(&doc);
    assert!(
        anchors.contains("a") && anchors.contains("a-1") && anchors.len() == 2,
        "{anchors:?}"
    );
}
