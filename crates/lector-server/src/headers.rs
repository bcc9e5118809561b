//! Headers every response carries, so that the pages cannot be framed by another site
//! (clickjacking: `X-Frame-Options: DENY` and `frame-ancestors 'none'`) and run no code but
//! their own: a Content-Security-Policy that allows the pages' inline scripts and styles by
//! their SHA-256 hashes, requests to this server only, and nothing else. Browsers are also told
//! not to guess content types and to send no `Referer` (a page's address may hold a question).

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// Adds the security headers to `request`'s response.
pub async fn secure(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, policy().clone());
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn policy() -> &'static HeaderValue {
    static POLICY: OnceLock<HeaderValue> = OnceLock::new();
    POLICY.get_or_init(|| {
        HeaderValue::from_str(&content_security_policy(&[crate::PAGE, crate::label::PAGE]))
            .expect("the policy is ASCII")
    })
}

/// The policy for `pages`: their inline `<script>` and `<style>` blocks by hash (inline event
/// handlers, `style` attributes and injected markup stay blocked), `fetch` and uploads to this
/// server only, no plugins, no `<base>`, forms posting nowhere else, and no framing.
pub fn content_security_policy(pages: &[&str]) -> String {
    let sources = |tag: &str| -> String {
        let hashes: Vec<String> = pages
            .iter()
            .flat_map(|page| inline_blocks(page, tag))
            .map(|block| format!("'sha256-{}'", base64(&Sha256::digest(block.as_bytes()))))
            .collect();
        match hashes.is_empty() {
            true => "'none'".to_string(),
            false => hashes.join(" "),
        }
    };
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src 'self'; \
         base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        sources("script"),
        sources("style"),
    )
}

/// The text of every `<tag>...</tag>` block without attributes in `page` (the pages write
/// their inline scripts and styles so), exactly as a browser hashes it.
fn inline_blocks<'a>(page: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut blocks = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find(&open) {
        let body = &rest[start + open.len()..];
        let Some(end) = body.find(&close) else { break };
        blocks.push(&body[..end]);
        rest = &body[end + close.len()..];
    }
    blocks
}

/// Standard base64 with padding (RFC 4648), as CSP hash sources write digests.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want, "{input}");
        }
    }

    #[test]
    fn the_policy_lists_every_inline_block_of_both_pages() {
        let policy = content_security_policy(&[crate::PAGE, crate::label::PAGE]);
        for tag in ["script", "style"] {
            let blocks = [crate::PAGE, crate::label::PAGE].map(|p| inline_blocks(p, tag).len());
            assert_eq!(blocks, [1, 1], "one inline <{tag}> per page");
        }
        // The known hash of a known block: `alert(1)` hashes to this in every browser.
        let known = content_security_policy(&["<script>alert(1)</script>"]);
        assert!(
            known.contains("script-src 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"),
            "{known}"
        );
        assert!(known.contains("style-src 'none'"), "{known}");
        for directive in [
            "default-src 'none'",
            "frame-ancestors 'none'",
            "connect-src 'self'",
        ] {
            assert!(policy.contains(directive), "{policy}");
        }
        assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"));
    }
}
