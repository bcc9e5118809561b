//! Who may talk to the server: the API key, the `Host` and `Origin` checks that keep web pages
//! from driving a server on this machine, the JSON-only rule for request bodies, and the refusal
//! to serve beyond this machine without a key.
//!
//! A web page can send requests to `http://127.0.0.1:8080` from the user's browser. A
//! cross-site `fetch` with a `text/plain` body needs no CORS preflight, so every `POST` must be
//! `application/json` (415 otherwise), which a page can only send cross-site after a preflight
//! this server never approves. A request whose `Origin` is present and is not this server's
//! own (the `Host` it was sent to, or an allowed host's origin, the same scheme, name and port)
//! gets 403. DNS rebinding (a page's own
//! domain re-pointed at 127.0.0.1) makes the browser send that domain as `Host`, so the `Host`
//! must be a loopback name or address, the address the server is bound to, any address when
//! bound to all interfaces (an address cannot be rebound), or an allowed host.

use crate::error::{ApiError, Error};
use crate::keys::{sha256, Principal, Scope};
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The environment variable an API key may come from.
pub const API_KEY_ENV: &str = "LECTOR_API_KEY";

/// A required API key, kept as its SHA-256 digest: requests are compared digest to digest in
/// constant time, so neither the key's bytes nor its length leak through timing.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    digest: [u8; 32],
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(..)")
    }
}

impl ApiKey {
    /// A key; an empty (or all-whitespace) one is refused rather than meaning "no key".
    pub fn new(key: &str) -> Result<Self, Error> {
        if key.trim().is_empty() {
            return Err(Error::ApiKey("the API key is empty".into()));
        }
        Ok(ApiKey {
            digest: sha256(key),
        })
    }

    /// The key from `flag` (`--api-key`, visible to other users in `ps`), else from `file`
    /// (`--api-key-file`, surrounding whitespace dropped), else from `$LECTOR_API_KEY` (unset
    /// or empty: no key). Giving both the flag and the file is an error.
    pub fn from_sources(flag: Option<&str>, file: Option<&Path>) -> Result<Option<Self>, Error> {
        let env = match std::env::var(API_KEY_ENV) {
            Ok(value) => Some(value),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(Error::ApiKey(format!("${API_KEY_ENV} is not UTF-8")))
            }
        };
        resolve(flag, file, env.as_deref())
    }

    /// Whether `given` is the key.
    pub fn matches(&self, given: &str) -> bool {
        sha256(given)[..].ct_eq(&self.digest[..]).into()
    }
}

fn resolve(
    flag: Option<&str>,
    file: Option<&Path>,
    env: Option<&str>,
) -> Result<Option<ApiKey>, Error> {
    match (flag, file) {
        (Some(_), Some(_)) => Err(Error::ApiKey(
            "give the API key once: --api-key or --api-key-file, not both".into(),
        )),
        (Some(key), None) => ApiKey::new(key).map(Some),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::ApiKey(format!(
                    "cannot read the API key file {}: {e}",
                    path.display()
                ))
            })?;
            ApiKey::new(text.trim())
                .map(Some)
                .map_err(|_| Error::ApiKey(format!("the API key file {} is empty", path.display())))
        }
        (None, None) => match env.map(str::trim).filter(|k| !k.is_empty()) {
            Some(key) => ApiKey::new(key).map(Some),
            None => Ok(None),
        },
    }
}

/// Refuses to serve on `addr` beyond this machine without an API key, unless `insecure_no_auth`
/// says so explicitly.
pub fn check_exposure(
    addr: SocketAddr,
    authenticates: bool,
    insecure_no_auth: bool,
) -> Result<(), Error> {
    if addr.ip().is_loopback() || authenticates || insecure_no_auth {
        Ok(())
    } else {
        Err(Error::Exposed(addr))
    }
}

/// 401 unless the request carries `Authorization: Bearer <key>` (the scheme in any case) with a
/// known key, when keys are set; 403 when the key lacks the route's scope ([`required`]). The
/// liveness probe and the pages need none. The key's [`Principal`] goes with the request to the
/// handlers, which confine a tenant's key to its documents.
pub async fn authorize(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    if !state.config.authenticates() || is_public(request.uri().path()) {
        return next.run(request).await;
    }
    let found = match bearer(request.headers()).map(|given| state.config.principal(given)) {
        Some(Err(crate::keys::KeysUnavailable)) => {
            // Fail closed: the reason (which names the file) is in the server's log.
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server's key file cannot be used: no key is accepted until it is fixed",
            )
            .into_response_for(request.uri().path());
        }
        Some(Ok(found)) => found,
        None => None,
    };
    if let Some(principal) = found {
        if let Err(message) = required(&principal, request.method(), request.uri().path()) {
            return ApiError::new(StatusCode::FORBIDDEN, message)
                .into_response_for(request.uri().path());
        }
        request.extensions_mut().insert(principal);
        return next.run(request).await;
    }
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "this server needs an API key: send `Authorization: Bearer <key>`",
    )
    .into_response_for(request.uri().path());
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Whether `principal` may call `method path`: the scope each route needs, and metrics (every
/// tenant's counts) only for keys without a tenant. Routes not named here (the
/// OpenAPI document, unknown paths) need a valid key only.
fn required(principal: &Principal, method: &Method, path: &str) -> Result<(), String> {
    let documents = path == "/v1/documents" || path.starts_with("/v1/documents/");
    let (scope, global) = match path {
        "/v1/ask" | "/v1/chat/completions" | "/v1/search" | "/v1/feedback" | "/v1/prompts" => {
            (Scope::Ask, false)
        }
        "/v1/label/next" | "/v1/labels" => (Scope::Admin, false),
        "/metrics" => (Scope::Admin, true),
        _ if documents && method == Method::DELETE => (Scope::Admin, false),
        _ if documents && method == Method::POST => (Scope::Write, false),
        _ if documents => (Scope::Ask, false),
        _ => return Ok(()),
    };
    if !principal.allows(scope) {
        return Err(format!(
            "the key `{}` lacks the `{}` scope this route needs",
            principal.name,
            scope.name()
        ));
    }
    if global && principal.tenant.is_some() {
        return Err(format!(
            "the key `{}` belongs to a tenant; this route shows every tenant's data and needs a key without one",
            principal.name
        ));
    }
    Ok(())
}

/// Routes that never need the API key: the liveness probe, and the pages (static, no data;
/// they ask for the key and send it with their API calls).
fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/" | "/label")
}

/// The credentials of `Authorization: Bearer <token>`; the scheme is case-insensitive (RFC 9110).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// 415 for a `POST`, `PUT` or `PATCH` whose body is not declared `application/json`
/// (parameters such as `charset` allowed).
pub async fn require_json(request: Request, next: Next) -> Response {
    let has_body = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH
    );
    if !has_body || is_json(request.headers()) {
        return next.run(request).await;
    }
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "the body must be JSON: send `Content-Type: application/json`",
    )
    .into_response_for(request.uri().path())
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// 403 for a `Host` this server does not answer to, or an `Origin` that is not its own (see the
/// module documentation).
pub async fn check_host_and_origin(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let allowed = &state.config.allowed_hosts;
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let refusal = match host {
        Some(host) if !host_allowed(host, state.bound_ip(), allowed) => Some(format!(
            "host `{host}` is not served here (allow it with --allowed-host)"
        )),
        _ => match headers.get(header::ORIGIN) {
            Some(origin) if !origin_allowed(origin.to_str().unwrap_or(""), host, allowed) => {
                Some(format!(
                    "cross-origin requests are refused (origin `{}`)",
                    origin.to_str().unwrap_or("?")
                ))
            }
            _ => None,
        },
    };
    match refusal {
        None => next.run(request).await,
        Some(message) => {
            ApiError::new(StatusCode::FORBIDDEN, message).into_response_for(request.uri().path())
        }
    }
}

/// Whether a `Host` header (`name`, `name:port`, `[v6]:port`) names this server.
fn host_allowed(host: &str, bound: Option<IpAddr>, allowed: &[String]) -> bool {
    let name = host_name(host);
    if name == "localhost" || in_allow_list(&name, allowed) {
        return true;
    }
    match name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(ip) => ip.is_loopback() || bound.is_some_and(|b| b == ip || b.is_unspecified()),
        Err(_) => false,
    }
}

/// Whether an `Origin` is this server's own: the `Host` the request was sent to (the same name
/// and port, a missing port being the origin scheme's default), or an allowed host's origin,
/// matched exactly in scheme, name and port ([`AllowedHost::origin`]). `null` (sandboxed
/// frames, files) never is.
fn origin_allowed(origin: &str, host: Option<&str>, allowed: &[String]) -> bool {
    let Some(origin) = Origin::parse(origin) else {
        return false;
    };
    let same_origin = host.and_then(authority).is_some_and(|(name, port)| {
        name == origin.name && port.unwrap_or(origin.port) == origin.port
    });
    same_origin
        || allowed
            .iter()
            .filter_map(|a| AllowedHost::parse(a))
            .any(|a| a.origin() == origin)
}

/// A web origin: scheme, host name (lower-cased, no trailing dot) and port, the scheme's
/// default made explicit, so that `https://a.example` and `https://a.example:443` are one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: &'static str,
    name: String,
    port: u16,
}

impl Origin {
    /// `http(s)://name[:port]` with nothing after it, as browsers send `Origin`.
    fn parse(text: &str) -> Option<Origin> {
        let (scheme, rest) = text.trim().split_once("://")?;
        let scheme = web_scheme(scheme)?;
        let (name, port) = authority(rest)?;
        Some(Origin {
            scheme,
            name,
            port: port.unwrap_or_else(|| default_port(scheme)),
        })
    }
}

/// An `--allowed-host` entry: `NAME`, `NAME:PORT` or `SCHEME://NAME[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedHost {
    /// `http` or `https`, when the entry names one.
    scheme: Option<&'static str>,
    name: String,
    port: Option<u16>,
}

impl AllowedHost {
    /// The entry, or `None` when it is none of the three forms.
    fn parse(entry: &str) -> Option<AllowedHost> {
        let entry = entry.trim();
        let (scheme, rest) = match entry.split_once("://") {
            Some((scheme, rest)) => (Some(web_scheme(scheme)?), rest.trim_end_matches('/')),
            None => (None, entry),
        };
        let (name, port) = authority(rest)?;
        Some(AllowedHost { scheme, name, port })
    }

    /// The one origin whose pages may call this server through this entry: the scheme
    /// written, else `https` (a server reached by name sits behind a TLS proxy: lector has no
    /// TLS), and the port written, else the scheme's default.
    fn origin(&self) -> Origin {
        let scheme = self.scheme.unwrap_or("https");
        Origin {
            scheme,
            name: self.name.clone(),
            port: self.port.unwrap_or_else(|| default_port(scheme)),
        }
    }
}

/// Refuses `--allowed-host` entries that are not `NAME`, `NAME:PORT` or `http(s)://NAME[:PORT]`:
/// they would silently allow nothing.
pub fn check_allowed_hosts(allowed: &[String]) -> Result<(), Error> {
    match allowed.iter().find(|a| AllowedHost::parse(a).is_none()) {
        Some(bad) => Err(Error::AllowedHost(format!(
            "--allowed-host `{bad}` is not NAME, NAME:PORT or http(s)://NAME[:PORT]"
        ))),
        None => Ok(()),
    }
}

fn web_scheme(scheme: &str) -> Option<&'static str> {
    match scheme.to_ascii_lowercase().as_str() {
        "http" => Some("http"),
        "https" => Some("https"),
        _ => None,
    }
}

fn default_port(scheme: &str) -> u16 {
    match scheme {
        "http" => 80,
        _ => 443,
    }
}

/// `name[:port]` (an IPv6 address in brackets) as the name, lower-cased and without a
/// trailing dot, and the port written; `None` when the name is empty, something follows the
/// authority (a path, credentials) or the port is not a number up to 65535.
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let text = text.trim();
    if text.contains(['/', '?', '#', '@']) {
        return None;
    }
    let (name, port) = match text.strip_prefix('[') {
        Some(inner) => {
            let close = inner.find(']')? + 2;
            let port = match &text[close..] {
                "" => None,
                rest => Some(rest.strip_prefix(':')?),
            };
            (&text[..close], port)
        }
        None => match text.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (text, None),
        },
    };
    let port = match port {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => Some(p.parse().ok()?),
        Some(_) => return None,
        None => None,
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some((name, port))
}

fn in_allow_list(name: &str, allowed: &[String]) -> bool {
    allowed
        .iter()
        .filter_map(|a| AllowedHost::parse(a))
        .any(|a| a.name == name)
}

/// The host name of `host[:port]`, lower-cased, without a trailing dot; IPv6 keeps its brackets.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if host.starts_with('[') {
        host.split_inclusive(']').next().unwrap_or(host)
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_by_digest() {
        let key = ApiKey::new("s3cret").unwrap();
        assert!(key.matches("s3cret"));
        for wrong in ["s3creT", "s3cret2", "s3cre", ""] {
            assert!(!key.matches(wrong), "{wrong}");
        }
        assert!(ApiKey::new("  ").is_err());
        assert_eq!(format!("{key:?}"), "ApiKey(..)", "Debug shows no key");
    }

    #[test]
    fn the_key_comes_from_the_flag_a_file_or_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, "from-file\n").unwrap();
        let key = |flag, file, env| resolve(flag, file, env).unwrap().unwrap();
        assert!(key(Some("flag"), None, Some("env")).matches("flag"));
        assert!(key(None, Some(file.as_path()), Some("env")).matches("from-file"));
        assert!(key(None, None, Some("env")).matches("env"));
        assert_eq!(resolve(None, None, Some("")).unwrap(), None);
        assert_eq!(resolve(None, None, None).unwrap(), None);
        assert!(resolve(Some("a"), Some(file.as_path()), None).is_err());
        assert!(resolve(Some(""), None, None).is_err());
        std::fs::write(&file, "\n").unwrap();
        let err = resolve(None, Some(file.as_path()), None).unwrap_err();
        assert!(err.to_string().contains("is empty"), "{err}");
        let missing = dir.path().join("missing");
        assert!(resolve(None, Some(missing.as_path()), None).is_err());
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        let mut headers = HeaderMap::new();
        for value in ["Bearer k", "bearer k", "BEARER  k "] {
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            assert_eq!(bearer(&headers), Some("k"), "{value}");
        }
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic k"));
        assert_eq!(bearer(&headers), None);
    }

    #[test]
    fn hosts_are_loopback_the_bound_address_or_allowed() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let lan: IpAddr = "192.168.1.5".parse().unwrap();
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        let allowed = vec!["Lector.Example.org".to_string()];
        for host in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST",
            "localhost.",
        ] {
            assert!(host_allowed(host, Some(lo), &[]), "{host}");
        }
        assert!(host_allowed("lector.example.org:443", Some(lo), &allowed));
        assert!(host_allowed("192.168.1.5:8080", Some(lan), &[]));
        assert!(!host_allowed("192.168.1.6:8080", Some(lan), &[]));
        assert!(host_allowed("192.168.1.6:8080", Some(any), &[]));
        for host in [
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
        ] {
            assert!(!host_allowed(host, Some(any), &allowed), "{host}");
        }
    }

    #[test]
    fn origins_must_be_the_servers_own() {
        let host = Some("127.0.0.1:8080");
        assert!(origin_allowed("http://127.0.0.1:8080", host, &[]));
        for origin in [
            "http://127.0.0.1:9090",
            "http://localhost:8080",
            "https://evil.example",
            "null",
            "",
        ] {
            assert!(!origin_allowed(origin, host, &[]), "{origin}");
        }
        let allowed = vec!["lector.example.org".to_string()];
        assert!(origin_allowed("https://lector.example.org", host, &allowed));
    }

    #[test]
    fn allowed_origins_match_scheme_name_and_port_exactly() {
        let host = Some("127.0.0.1:8080");
        // A bare name allows its https origin on the default port, nothing else of that host.
        let bare = vec!["Lector.Example.org.".to_string()];
        for origin in [
            "https://lector.example.org",
            "https://lector.example.org:443",
            "HTTPS://LECTOR.EXAMPLE.ORG",
        ] {
            assert!(origin_allowed(origin, host, &bare), "{origin}");
        }
        for origin in [
            "http://lector.example.org",
            "https://lector.example.org:8443",
            "http://lector.example.org:443",
            "https://lector.example.org.evil.example",
            "https://lector.example.org@evil.example",
            "https://lector.example.org:99999",
        ] {
            assert!(!origin_allowed(origin, host, &bare), "{origin}");
        }
        // Written out: that scheme and port only.
        let written = vec![
            "http://intranet.example:8081".to_string(),
            "docs.example:8443".to_string(),
        ];
        assert!(origin_allowed(
            "http://intranet.example:8081",
            host,
            &written
        ));
        assert!(origin_allowed("https://docs.example:8443", host, &written));
        for origin in [
            "https://intranet.example:8081",
            "http://intranet.example",
            "http://intranet.example:8082",
            "http://docs.example:8443",
            "https://docs.example",
        ] {
            assert!(!origin_allowed(origin, host, &written), "{origin}");
        }
        // The server's own origin: the Host's name and port, the default port made explicit.
        assert!(origin_allowed(
            "http://lector.example.org",
            Some("lector.example.org:80"),
            &[]
        ));
        assert!(origin_allowed(
            "https://lector.example.org",
            Some("lector.example.org"),
            &[]
        ));
        assert!(!origin_allowed(
            "http://lector.example.org",
            Some("lector.example.org:8080"),
            &[]
        ));
        assert!(!origin_allowed(
            "http://[::1]:8081",
            Some("[::1]:8080"),
            &[]
        ));
        assert!(origin_allowed("http://[::1]:8080", Some("[::1]:8080"), &[]));
    }

    #[test]
    fn allowed_hosts_that_name_no_host_are_refused() {
        let ok = [
            "a.example",
            "a.example:8443",
            "http://a.example:81",
            "https://a.example/",
            "[::1]:8080",
        ];
        assert!(check_allowed_hosts(&ok.map(String::from)).is_ok());
        for bad in [
            "ftp://a.example",
            "a.example:http",
            "a.example/path",
            "https://",
            ":8080",
            "a.example:70000",
        ] {
            let err = check_allowed_hosts(&[bad.to_string()]).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn json_content_types_with_parameters_pass() {
        let mut headers = HeaderMap::new();
        assert!(!is_json(&headers));
        for (value, json) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
            ("multipart/form-data; boundary=x", false),
            ("application/jsonp", false),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_json(&headers), json, "{value}");
        }
    }

    #[test]
    fn no_key_beyond_loopback_needs_the_explicit_flag() {
        let key = ApiKey::new("k").unwrap();
        let lan: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(check_exposure(lo, false, false).is_ok());
        assert!(check_exposure(lan, key.matches("k"), false).is_ok());
        assert!(check_exposure(lan, false, true).is_ok());
        let err = check_exposure(lan, false, false).unwrap_err();
        assert!(err.to_string().contains("--insecure-no-auth"), "{err}");
    }
}
