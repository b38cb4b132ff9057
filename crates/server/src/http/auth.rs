//! Who may call which endpoint: bearer tokens with a role.
//!
//! Each endpoint of [`super::ENDPOINTS`] declares the [`Access`] it needs:
//! `read` (status, leader, watch, metrics, key-value reads and watches),
//! `write` (key-value writes: put, delete, transactions; and all of read),
//! `admin` (transfer, which moves leadership; and all of write), or `probe` (`/healthz` and
//! `/v1/is-leader`: open to anyone by default, for load balancers, or `read`
//! when [`ApiAuth::open_probes`] is false). A request carries its token as
//! `Authorization: Bearer <token>`.
//!
//! | the request | answer |
//! |---|---|
//! | no token where one is needed | `401`, `WWW-Authenticate: Bearer realm="tenure"` |
//! | a token no one configured, or not a Bearer token | `401`, `WWW-Authenticate: Bearer realm="tenure", error="invalid_token"` |
//! | a token whose role is below the endpoint's (`read` on a `write` or `admin` endpoint, `write` on an `admin` one) | `403`, `WWW-Authenticate: Bearer realm="tenure", error="insufficient_scope"` |
//!
//! The server keeps only the SHA-256 digest of each token and compares the
//! digest of the presented token with every configured one in constant time.
//! Token values are never logged, printed or put into an answer; refusals are
//! counted by the server's [`RateLimitedLog`](tenure_node::RateLimitedLog).
//!
//! Tokens come from files (one secret per file, so the secret stays out of
//! the main configuration; a file readable by every user is refused) or as a
//! digest (`token_sha256`), so that the configuration holds no secret at all.

use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::fmt;
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Shortest token accepted: 16 bytes, 96 bits or more of a random hex or
/// base64 secret. Refuses passwords like `secret`.
pub const MIN_TOKEN_BYTES: usize = 16;
/// Longest token accepted (a header line stays well under the server's limits).
pub const MAX_TOKEN_BYTES: usize = 512;
/// Most tokens one server accepts; each request is checked against all of them.
pub const MAX_TOKENS: usize = 64;
/// Longest token name.
pub const MAX_TOKEN_NAME_BYTES: usize = 64;
/// The realm named in `WWW-Authenticate`.
pub const REALM: &str = "tenure";

/// A token's role, in increasing order of power: each includes everything
/// the ones before it may do (the order of the variants is the order of
/// the roles).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Status, leader, watch, metrics (and the probes); key-value reads,
    /// lists and watches.
    Read,
    /// Key-value writes (put, delete, transactions); and all of `Read`. For
    /// the applications that keep their state in the store: they cannot move
    /// leadership.
    Write,
    /// Transfer (moves leadership); and all of `Write`.
    Admin,
}

impl Role {
    /// `read` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an endpoint requires of its callers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load-balancer probe: open to anyone while [`ApiAuth::probes_open`]
    /// (the default), else a `read` token.
    Probe,
    /// A token of role `read` or above.
    Read,
    /// A token of role `write` or `admin`.
    Write,
    /// A token of role `admin`.
    Admin,
}

impl Access {
    /// The role needed when the endpoint is not open.
    pub fn role(self) -> Role {
        match self {
            Access::Probe | Access::Read => Role::Read,
            Access::Write => Role::Write,
            Access::Admin => Role::Admin,
        }
    }

    /// `probe`, `read`, `write` or `admin`, for docs and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Probe => "probe",
            Access::Read => "read",
            Access::Write => "write",
            Access::Admin => "admin",
        }
    }
}

/// A bad token, token file or token configuration. Never contains a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file cannot be read.
    #[error("cannot read the token file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The token file may be read by every user of the machine.
    #[error(
        "the token file {} is readable by every user (mode {mode:03o}); \
         make it private: chmod 600 {}",
        path.display(),
        path.display()
    )]
    WorldReadable {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The token is too short, too long or has characters a header cannot carry.
    #[error("the token {what} {problem}")]
    BadToken {
        /// Where it came from ("in /etc/tenure/ops.token", "given with --token").
        what: String,
        /// What is wrong with it.
        problem: String,
    },
    /// `token_sha256` is not a SHA-256 digest in hex.
    #[error(
        "api token {name:?}: token_sha256 must be 64 hexadecimal digits (`sha256sum` of the token)"
    )]
    BadDigest {
        /// The token's name.
        name: String,
    },
    /// Neither or both of `token_file` and `token_sha256`.
    #[error("api token {name:?}: give exactly one of token_file and token_sha256")]
    Source {
        /// The token's name.
        name: String,
    },
    /// A name that is empty, too long or has characters other than
    /// letters, digits, `-`, `_` and `.`.
    #[error(
        "api token name {name:?} must be 1 to {MAX_TOKEN_NAME_BYTES} letters, digits, '-', '_' or '.'"
    )]
    BadName {
        /// The name.
        name: String,
    },
    /// Two tokens with one name.
    #[error("the api token name {name:?} is used twice; names must be unique")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// Two names for one secret: its role would be ambiguous.
    #[error("api tokens {first:?} and {second:?} have the same secret; give each its own")]
    DuplicateSecret {
        /// The first name.
        first: String,
        /// The second.
        second: String,
    },
    /// More than [`MAX_TOKENS`].
    #[error("{count} api tokens; at most {MAX_TOKENS}")]
    TooMany {
        /// How many were given.
        count: usize,
    },
}

/// Checks a token's text: [`MIN_TOKEN_BYTES`] to [`MAX_TOKEN_BYTES`] visible
/// ASCII characters (what an HTTP header carries; no spaces). `what` says
/// where it came from, for the error.
pub fn check_token(token: &str, what: &str) -> Result<(), TokenError> {
    let bad = |problem: String| TokenError::BadToken { what: what.to_string(), problem };
    if token.len() < MIN_TOKEN_BYTES {
        return Err(bad(format!(
            "is {} bytes long; a token needs at least {MIN_TOKEN_BYTES} \
             (make one with `openssl rand -hex 32`)",
            token.len()
        )));
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err(bad(format!("is longer than {MAX_TOKEN_BYTES} bytes")));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad(
            "has a character an HTTP header cannot carry: use visible ASCII only (letters, \
             digits, punctuation; no spaces)"
                .to_string(),
        ));
    }
    Ok(())
}

/// Reads a token from `path`: the file's text without surrounding
/// whitespace (so `echo TOKEN > file` works), checked with [`check_token`].
/// A file readable by every user is refused: anyone on the machine could
/// take the token.
pub fn read_token_file(path: &Path) -> Result<String, TokenError> {
    let read = |source| TokenError::Read { path: path.to_path_buf(), source };
    let mode = std::fs::metadata(path).map_err(read)?.permissions().mode();
    if mode & 0o004 != 0 {
        return Err(TokenError::WorldReadable { path: path.to_path_buf(), mode: mode & 0o777 });
    }
    let text = std::fs::read_to_string(path).map_err(read)?;
    let token = text.trim();
    check_token(token, &format!("in {}", path.display()))?;
    Ok(token.to_string())
}

fn sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A token of the configuration, as written in the config file:
///
/// ```toml
/// [[api_tokens]]
/// name = "ops"
/// role = "admin"
/// token_file = "/etc/tenure/ops.token"   # or: token_sha256 = "<64 hex digits>"
/// ```
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    /// A name for people and for the per-token limits ("ops", "monitoring").
    pub name: String,
    /// `read`, `write` or `admin`.
    pub role: Role,
    /// A file holding the token (relative paths: from the config file's directory).
    pub token_file: Option<PathBuf>,
    /// The token's SHA-256 digest in hex, instead of a file.
    pub token_sha256: Option<String>,
}

impl TokenSpec {
    /// Reads the token (a relative `token_file` is taken from `base`).
    pub fn load(&self, base: &Path) -> Result<ApiToken, TokenError> {
        match (&self.token_file, &self.token_sha256) {
            (Some(file), None) => {
                ApiToken::new(&self.name, self.role, &read_token_file(&base.join(file))?)
            }
            (None, Some(hex)) => ApiToken::from_sha256(&self.name, self.role, hex),
            _ => Err(TokenError::Source { name: self.name.clone() }),
        }
    }
}

/// One accepted token: its name, role and SHA-256 digest (the secret itself
/// is not kept).
#[derive(Clone)]
pub struct ApiToken {
    name: Arc<str>,
    role: Role,
    digest: [u8; 32],
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiToken").field("name", &self.name).field("role", &self.role).finish()
    }
}

impl ApiToken {
    /// A token from its secret, checked with [`check_token`].
    pub fn new(name: &str, role: Role, token: &str) -> Result<Self, TokenError> {
        check_name(name)?;
        check_token(token, &format!("of api token {name:?}"))?;
        Ok(ApiToken { name: name.into(), role, digest: sha256(token) })
    }

    /// A token from the hex SHA-256 digest of its secret.
    pub fn from_sha256(name: &str, role: Role, hex: &str) -> Result<Self, TokenError> {
        check_name(name)?;
        let hex = hex.trim();
        let bad = || TokenError::BadDigest { name: name.to_string() };
        if hex.len() != 64 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut digest = [0u8; 32];
        for (i, byte) in digest.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(ApiToken { name: name.into(), role, digest })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its role.
    pub fn role(&self) -> Role {
        self.role
    }
}

fn check_name(name: &str) -> Result<(), TokenError> {
    let ok = (1..=MAX_TOKEN_NAME_BYTES).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    ok.then_some(()).ok_or_else(|| TokenError::BadName { name: name.to_string() })
}

/// How the API admits callers: its tokens, whether the probes are open, or
/// (for local tests only) no checks at all.
///
/// [`ApiAuth::default`] has no tokens: every endpoint but the open probes
/// answers 401. That is what an embedder gets who configures nothing; the
/// `tenure server` command refuses to start that way instead.
#[derive(Clone)]
pub struct ApiAuth {
    tokens: Vec<ApiToken>,
    probes_open: bool,
    insecure_open: bool,
}

impl Default for ApiAuth {
    fn default() -> Self {
        ApiAuth { tokens: Vec::new(), probes_open: true, insecure_open: false }
    }
}

impl fmt::Debug for ApiAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiAuth")
            .field("tokens", &self.tokens)
            .field("probes_open", &self.probes_open)
            .field("insecure_open", &self.insecure_open)
            .finish()
    }
}

impl PartialEq for ApiAuth {
    /// Equal when they admit the same callers (tokens compared by digest).
    fn eq(&self, other: &Self) -> bool {
        let key = |t: &ApiToken| (t.name.clone(), t.role, t.digest);
        self.probes_open == other.probes_open
            && self.insecure_open == other.insecure_open
            && self.tokens.iter().map(key).eq(other.tokens.iter().map(key))
    }
}

impl Eq for ApiAuth {}

impl ApiAuth {
    /// Admits the holders of `tokens` (unique names, distinct secrets, at
    /// most [`MAX_TOKENS`]); the probes are open.
    pub fn with_tokens(tokens: Vec<ApiToken>) -> Result<Self, TokenError> {
        if tokens.len() > MAX_TOKENS {
            return Err(TokenError::TooMany { count: tokens.len() });
        }
        for (i, a) in tokens.iter().enumerate() {
            for b in &tokens[..i] {
                if a.name == b.name {
                    return Err(TokenError::DuplicateName { name: a.name.to_string() });
                }
                if bool::from(a.digest.ct_eq(&b.digest)) {
                    return Err(TokenError::DuplicateSecret {
                        first: b.name.to_string(),
                        second: a.name.to_string(),
                    });
                }
            }
        }
        Ok(ApiAuth { tokens, ..ApiAuth::default() })
    }

    /// Admits everyone to everything, transfer included. For a local test
    /// cluster only: anyone who reaches the port can move leadership.
    pub fn insecure_open() -> Self {
        ApiAuth { insecure_open: true, ..ApiAuth::default() }
    }

    /// Opens the probes (`/healthz`, `/v1/is-leader`) to anyone (true, the
    /// default) or asks a `read` token for them (false).
    pub fn open_probes(mut self, open: bool) -> Self {
        self.probes_open = open;
        self
    }

    /// Whether the probes are open.
    pub fn probes_open(&self) -> bool {
        self.probes_open
    }

    /// Whether every check is off ([`ApiAuth::insecure_open`]).
    pub fn is_insecure_open(&self) -> bool {
        self.insecure_open
    }

    /// The accepted tokens.
    pub fn tokens(&self) -> &[ApiToken] {
        &self.tokens
    }

    /// The configured token whose secret is `secret`, if any (every token
    /// compared in constant time): the etcd listener's check of the token
    /// its clients send.
    pub fn token_of(&self, secret: &str) -> Option<&ApiToken> {
        let header = format!("Bearer {}", secret.trim());
        self.authenticate(std::iter::once(header.as_bytes())).ok()
    }

    /// The role of the configured token whose secret is `token`, if any
    /// (`tenure server --supervised` checks its notice token at start).
    pub fn role_of(&self, token: &str) -> Option<Role> {
        let header = format!("Bearer {}", token.trim());
        self.authenticate(std::iter::once(header.as_bytes())).ok().map(|t| t.role)
    }

    /// Admits or refuses a request for an endpoint needing `access`, given
    /// its `Authorization` headers.
    pub(crate) fn authorize<'h>(
        &self,
        access: Access,
        authorization: impl Iterator<Item = &'h [u8]>,
    ) -> Result<Caller, Refusal> {
        if self.insecure_open {
            return Ok(Caller { token: None, role: Some(Role::Admin), addr: None });
        }
        if access == Access::Probe && self.probes_open {
            // Open to anyone; a valid token still names its caller (and so
            // proves the connection), a missing or bad one is no refusal.
            let caller = match self.authenticate(authorization) {
                Ok(token) => {
                    Caller { token: Some(token.name.clone()), role: Some(token.role), addr: None }
                }
                Err(_) => Caller { token: None, role: None, addr: None },
            };
            return Ok(caller);
        }
        let token = self.authenticate(authorization)?;
        let needed = access.role();
        if token.role < needed {
            return Err(Refusal::Forbidden { role: token.role, needed });
        }
        Ok(Caller { token: Some(token.name.clone()), role: Some(token.role), addr: None })
    }

    /// The configured token the request presents.
    fn authenticate<'h>(
        &self,
        mut authorization: impl Iterator<Item = &'h [u8]>,
    ) -> Result<&ApiToken, Refusal> {
        let header = authorization.next().ok_or(Refusal::NoToken)?;
        if authorization.next().is_some() {
            return Err(Refusal::BadToken("more than one Authorization header"));
        }
        let text = std::str::from_utf8(header).map_err(|_| Refusal::BadToken("not a token"))?;
        let (scheme, token) = text.trim().split_once(' ').unwrap_or((text, ""));
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Refusal::BadToken("only `Authorization: Bearer <token>` is accepted"));
        }
        let token = token.trim();
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::BadToken("the token is not valid"));
        }
        let digest = sha256(token);
        // Every configured token is compared, in constant time each.
        let mut found = None;
        for t in &self.tokens {
            if bool::from(t.digest.ct_eq(&digest)) {
                found = Some(t);
            }
        }
        found.ok_or(Refusal::BadToken("the token is not valid"))
    }
}

/// Who is calling, as the handlers see it (a request extension).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The name of the token presented, if one was needed.
    pub token: Option<Arc<str>>,
    /// Its role; None for an anonymous caller of an open probe.
    pub role: Option<Role>,
    /// The address the request came from, when known.
    pub addr: Option<IpAddr>,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A token is needed and none came: 401.
    NoToken,
    /// The token is unknown or malformed: 401.
    BadToken(&'static str),
    /// The token's role is below the endpoint's: 403.
    Forbidden {
        /// The token's role.
        role: Role,
        /// The endpoint's.
        needed: Role,
    },
}

impl Refusal {
    /// The reason under which the refusal is counted in the log.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refusal::NoToken => "401 no token",
            Refusal::BadToken(_) => "401 invalid token",
            Refusal::Forbidden { .. } => "403 role too low",
        }
    }

    /// The `WWW-Authenticate` challenge (RFC 6750).
    pub(crate) fn challenge(self) -> String {
        match self {
            Refusal::NoToken => format!("Bearer realm=\"{REALM}\""),
            Refusal::BadToken(_) => format!("Bearer realm=\"{REALM}\", error=\"invalid_token\""),
            Refusal::Forbidden { .. } => {
                format!("Bearer realm=\"{REALM}\", error=\"insufficient_scope\"")
            }
        }
    }

    /// The error message for `method path`.
    pub(crate) fn message(self, method: &str, path: &str) -> String {
        match self {
            Refusal::NoToken => format!(
                "{method} {path} needs a bearer token: send `Authorization: Bearer <token>` \
                 (with the CLI: --token, --token-file or TENURE_TOKEN)"
            ),
            Refusal::BadToken(why) => format!("{why}; {method} {path} needs a valid bearer token"),
            Refusal::Forbidden { role, needed } => {
                format!("this token's role is {role}; {method} {path} needs {needed}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "admin-0123456789abcdef";
    const READER: &str = "read-0123456789abcdef";
    const WRITER: &str = "write-0123456789abcdef";

    fn auth() -> ApiAuth {
        ApiAuth::with_tokens(vec![
            ApiToken::new("ops", Role::Admin, ADMIN).unwrap(),
            ApiToken::new("monitoring", Role::Read, READER).unwrap(),
            ApiToken::new("app", Role::Write, WRITER).unwrap(),
        ])
        .unwrap()
    }

    fn ask(auth: &ApiAuth, access: Access, header: Option<&str>) -> Result<Caller, Refusal> {
        auth.authorize(access, header.map(str::as_bytes).into_iter())
    }

    #[test]
    fn roles_gate_the_endpoints() {
        let a = auth();
        let admin = format!("Bearer {ADMIN}");
        let read = format!("bearer  {READER} ");
        assert_eq!(ask(&a, Access::Admin, Some(&admin)).unwrap().token.as_deref(), Some("ops"));
        assert_eq!(ask(&a, Access::Read, Some(&admin)).unwrap().role, Some(Role::Admin));
        assert_eq!(
            ask(&a, Access::Read, Some(&read)).unwrap().token.as_deref(),
            Some("monitoring")
        );
        assert_eq!(
            ask(&a, Access::Admin, Some(&read)),
            Err(Refusal::Forbidden { role: Role::Read, needed: Role::Admin })
        );
        // Write sits between: it reads and writes, but does not administer.
        let write = format!("Bearer {WRITER}");
        assert_eq!(ask(&a, Access::Write, Some(&write)).unwrap().role, Some(Role::Write));
        assert!(ask(&a, Access::Read, Some(&write)).is_ok());
        assert!(ask(&a, Access::Write, Some(&admin)).is_ok());
        assert_eq!(
            ask(&a, Access::Write, Some(&read)),
            Err(Refusal::Forbidden { role: Role::Read, needed: Role::Write })
        );
        assert_eq!(
            ask(&a, Access::Admin, Some(&write)),
            Err(Refusal::Forbidden { role: Role::Write, needed: Role::Admin })
        );
        assert_eq!(ask(&a, Access::Read, None), Err(Refusal::NoToken));
        assert!(matches!(ask(&a, Access::Read, Some("Bearer nope")), Err(Refusal::BadToken(_))));
        assert!(matches!(ask(&a, Access::Read, Some(ADMIN)), Err(Refusal::BadToken(_))));
        assert!(matches!(
            ask(&a, Access::Read, Some(&format!("Basic {ADMIN}"))),
            Err(Refusal::BadToken(_))
        ));
        let twice = [admin.as_bytes(), admin.as_bytes()];
        assert!(matches!(a.authorize(Access::Read, twice.into_iter()), Err(Refusal::BadToken(_))));
    }

    #[test]
    fn probes_are_open_unless_configured_otherwise() {
        let a = auth();
        assert_eq!(ask(&a, Access::Probe, None).unwrap().role, None);
        let closed = auth().open_probes(false);
        assert_eq!(ask(&closed, Access::Probe, None), Err(Refusal::NoToken));
        assert!(ask(&closed, Access::Probe, Some(&format!("Bearer {READER}"))).is_ok());
        // No tokens at all: locked but for the probes.
        let locked = ApiAuth::default();
        assert_eq!(
            ask(&locked, Access::Read, Some(&format!("Bearer {ADMIN}"))).unwrap_err().reason(),
            "401 invalid token"
        );
        assert!(ask(&locked, Access::Probe, None).is_ok());
        let open = ApiAuth::insecure_open();
        assert_eq!(ask(&open, Access::Admin, None).unwrap().role, Some(Role::Admin));
    }

    #[test]
    fn a_token_may_be_given_by_its_digest() {
        // printf %s admin-0123456789abcdef | sha256sum
        let hex = format!("{:x}", Sha256::digest(ADMIN.as_bytes()));
        let a =
            ApiAuth::with_tokens(vec![ApiToken::from_sha256("ops", Role::Admin, &hex).unwrap()])
                .unwrap();
        assert!(ask(&a, Access::Admin, Some(&format!("Bearer {ADMIN}"))).is_ok());
        for bad in ["", "abc", &"g".repeat(64), &"é".repeat(32)] {
            let err = ApiToken::from_sha256("ops", Role::Admin, bad).unwrap_err();
            assert!(err.to_string().contains("64 hexadecimal digits"), "{err}");
        }
    }

    #[test]
    fn bad_tokens_and_names_are_explained_without_the_secret() {
        let err = ApiToken::new("ops", Role::Admin, "secret").unwrap_err().to_string();
        assert!(err.contains("at least 16") && !err.contains("secret\""), "{err}");
        let err = ApiToken::new("ops", Role::Admin, "with a space 0123456789").unwrap_err();
        assert!(err.to_string().contains("visible ASCII"), "{err}");
        assert!(!err.to_string().contains("0123456789"), "{err}");
        let err = ApiToken::new("o p s", Role::Admin, ADMIN).unwrap_err().to_string();
        assert!(err.contains("letters, digits"), "{err}");
        let same = vec![
            ApiToken::new("a", Role::Admin, ADMIN).unwrap(),
            ApiToken::new("b", Role::Read, ADMIN).unwrap(),
        ];
        let err = ApiAuth::with_tokens(same).unwrap_err().to_string();
        assert!(err.contains("\"a\" and \"b\" have the same secret"), "{err}");
        let twice = vec![
            ApiToken::new("a", Role::Admin, ADMIN).unwrap(),
            ApiToken::new("a", Role::Read, READER).unwrap(),
        ];
        assert!(ApiAuth::with_tokens(twice).unwrap_err().to_string().contains("used twice"));
        assert!(!format!("{:?}", auth()).contains(ADMIN), "Debug shows no secret");
    }

    #[test]
    fn token_files_must_be_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ops.token");
        std::fs::write(&path, format!("{ADMIN}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = read_token_file(&path).unwrap_err().to_string();
        assert!(err.contains("readable by every user (mode 644)"), "{err}");
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(read_token_file(&path).unwrap(), ADMIN, "whitespace around it is dropped");
        let spec = TokenSpec {
            name: "ops".into(),
            role: Role::Admin,
            token_file: Some("ops.token".into()),
            token_sha256: None,
        };
        assert_eq!(spec.load(dir.path()).unwrap().name(), "ops", "relative to the base");
        let both = TokenSpec { token_sha256: Some("00".repeat(32)), ..spec.clone() };
        assert!(both.load(dir.path()).unwrap_err().to_string().contains("exactly one"));
        let missing = TokenSpec { token_file: Some("nope".into()), ..spec };
        let err = missing.load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("cannot read the token file") && err.contains("nope"), "{err}");
    }
}
