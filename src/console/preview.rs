//! How a listing shows a payload: the first bytes, as text when the
//! payload is UTF-8, else as hex, so a browser never receives megabytes
//! or bytes it cannot show.

/// Most payload bytes a listing shows as text.
pub const PREVIEW_TEXT_BYTES_MAX: usize = 512;
/// Most payload bytes a listing shows as hex (two characters each).
pub const PREVIEW_HEX_BYTES_MAX: usize = 128;

/// A payload's preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// The text shown.
    pub text: String,
    /// `text` or `hex`.
    pub encoding: &'static str,
    /// True when `text` shows only the payload's first bytes.
    pub truncated: bool,
}

impl Preview {
    /// The preview of `payload`.
    pub fn of(payload: &[u8]) -> Preview {
        match std::str::from_utf8(payload) {
            Ok(text) => {
                let mut end = text.len().min(PREVIEW_TEXT_BYTES_MAX);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                Preview {
                    text: text[..end].to_string(),
                    encoding: "text",
                    truncated: end < text.len(),
                }
            }
            Err(_) => {
                let end = payload.len().min(PREVIEW_HEX_BYTES_MAX);
                Preview {
                    text: hex::encode(&payload[..end]),
                    encoding: "hex",
                    truncated: end < payload.len(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_boundary_and_binary_shows_as_hex() {
        let short = Preview::of(b"hello");
        assert_eq!(
            (short.text.as_str(), short.encoding, short.truncated),
            ("hello", "text", false)
        );
        // 511 ASCII bytes then a 3-byte character across the bound.
        let long = format!("{}€tail", "a".repeat(PREVIEW_TEXT_BYTES_MAX - 1));
        let cut = Preview::of(long.as_bytes());
        assert_eq!(cut.text, "a".repeat(PREVIEW_TEXT_BYTES_MAX - 1));
        assert!(cut.truncated);
        let binary = Preview::of(&[0xff, 0x00, 0x10]);
        assert_eq!(
            (binary.text.as_str(), binary.encoding, binary.truncated),
            ("ff0010", "hex", false)
        );
        let big = Preview::of(&[0xfe; PREVIEW_HEX_BYTES_MAX + 1]);
        assert_eq!(big.text.len(), PREVIEW_HEX_BYTES_MAX * 2);
        assert!(big.truncated);
    }
}
