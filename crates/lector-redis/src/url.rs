//! `redis://[USER:PASSWORD@]HOST:PORT/NAME` and `rediss://...` (TLS): where a store lives.

use std::fmt;

/// A parsed store URL. Its [`Display`](fmt::Display) never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl {
    tls: bool,
    host: String,
    port: u16,
    username: Option<String>,
    password: Option<String>,
    name: String,
}

/// Why a store URL was refused; the message never holds the password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid store URL `{shown}`: {reason}")]
pub struct UrlError {
    shown: String,
    reason: String,
}

impl StoreUrl {
    /// Parses `redis://[USER[:PASSWORD]@]HOST[:PORT]/NAME` (TLS with `rediss://`; port 6379 by
    /// default). NAME names the store: its search index and the prefix of its keys.
    pub fn parse(text: &str) -> Result<StoreUrl, UrlError> {
        let refuse = |reason: &str| UrlError {
            shown: redact(text),
            reason: reason.to_string(),
        };
        let (tls, rest) = if let Some(rest) = text.strip_prefix("redis://") {
            (false, rest)
        } else if let Some(rest) = text.strip_prefix("rediss://") {
            (true, rest)
        } else {
            return Err(refuse("it must start with redis:// or rediss:// (TLS)"));
        };
        let (authority, name) = rest.split_once('/').ok_or_else(|| {
            refuse("it needs the store's name after the host: redis://HOST:PORT/NAME")
        })?;
        if !valid_name(name) {
            return Err(refuse(
                "the store name (after the host) must be 1 to 64 letters, digits, `_` or `-`",
            ));
        }
        let (credentials, host_port) = match authority.rsplit_once('@') {
            Some((credentials, host_port)) => (Some(credentials), host_port),
            None => (None, authority),
        };
        let (username, password) = match credentials {
            None => (None, None),
            Some(c) => match c.split_once(':') {
                Some((user, pass)) => (non_empty(user), Some(pass.to_string())),
                None => (non_empty(c), None),
            },
        };
        let (host, port) = match host_port.rsplit_once(':') {
            Some((host, port)) => (
                host,
                port.parse::<u16>()
                    .map_err(|_| refuse("the port must be a number from 1 to 65535"))?,
            ),
            None => (host_port, 6379),
        };
        if host.is_empty() || port == 0 {
            return Err(refuse("it needs a host and a port from 1 to 65535"));
        }
        Ok(StoreUrl {
            tls,
            host: host.to_string(),
            port,
            username,
            password,
            name: name.to_string(),
        })
    }

    /// The store's name: its search index, and the prefix of its keys (`NAME:`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the Redis client connects to (with the credentials, never shown).
    pub(crate) fn connection_info(&self) -> redis::RedisResult<redis::ConnectionInfo> {
        use redis::IntoConnectionInfo;
        let scheme = if self.tls { "rediss" } else { "redis" };
        let host = &self.host;
        let port = self.port;
        let info = format!("{scheme}://{host}:{port}/").into_connection_info()?;
        // No `CLIENT SETINFO` after connecting: two more replies to wait for, each up to the
        // timeout, when the server has stopped answering.
        let mut settings = info.redis_settings().clone().set_skip_set_lib_name();
        if let Some(user) = &self.username {
            settings = settings.set_username(user.clone());
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password.clone());
        }
        Ok(info.set_redis_settings(settings))
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "rediss" } else { "redis" };
        write!(f, "{scheme}://")?;
        match (&self.username, &self.password) {
            (Some(user), Some(_)) => write!(f, "{user}:***@")?,
            (Some(user), None) => write!(f, "{user}@")?,
            (None, Some(_)) => write!(f, ":***@")?,
            (None, None) => {}
        }
        write!(f, "{}:{}/{}", self.host, self.port, self.name)
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

/// Whether `text` names a store (`--store` rather than `--index`).
pub fn is_store_url(text: &str) -> bool {
    text.starts_with("redis://") || text.starts_with("rediss://")
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}

/// `text` with whatever sits between `://` and the last `@` of its authority replaced, for an
/// error about a URL that did not parse.
fn redact(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_never_show_the_password() {
        let url = StoreUrl::parse("rediss://app:s3cret@db.internal:6380/docs").unwrap();
        assert_eq!(url.name(), "docs");
        assert_eq!(url.to_string(), "rediss://app:***@db.internal:6380/docs");
        assert!(!format!("{url:?}").contains("s3cret"));
        let plain = StoreUrl::parse("redis://localhost/x_1").unwrap();
        assert_eq!(plain.to_string(), "redis://localhost:6379/x_1");
        for bad in [
            "http://h:1/x",
            "redis://h:1",
            "redis://h:1/",
            "redis://h:port/x",
            "redis://u:s3cret@h:1/bad name",
            "redis://:0/x",
        ] {
            let err = StoreUrl::parse(bad).unwrap_err().to_string();
            assert!(!err.contains("s3cret"), "{err}");
            assert!(err.contains("invalid store URL"), "{err}");
        }
    }
}
