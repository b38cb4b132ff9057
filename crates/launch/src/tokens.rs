//! API token files and the config file that names them: how a launcher
//! gives its servers the tokens it (and nobody else) holds.

use crate::error::Error;
use rand_core::{OsRng, RngCore};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// One token a server admits.
#[derive(Debug, Clone, Copy)]
pub struct ApiToken<'a> {
    /// Its name (`name` in the config; the owner of what it creates).
    pub name: &'a str,
    /// Its role: `read`, `write` or `admin`.
    pub role: &'a str,
    /// The token file, relative to the directory (mode 600).
    pub file: &'a str,
    /// The token itself.
    pub secret: &'a str,
}

/// A random token: 32 bytes from the operating system, in hex.
pub fn random_secret() -> String {
    let mut secret = [0u8; 32];
    OsRng.fill_bytes(&mut secret);
    secret.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes each token to its file in `dir` (created, mode 600) and the
/// config file `dir/config_name` that names them (`[[api_tokens]]`, token
/// files relative to the config file); returns the config file's path.
pub fn write_api_config(
    dir: &Path,
    config_name: &str,
    tokens: &[ApiToken<'_>],
) -> Result<PathBuf, Error> {
    let mut text = String::new();
    for t in tokens {
        let path = dir.join(t.file);
        File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(t.secret.as_bytes()))
            .map_err(Error::file("cannot write", &path))?;
        text.push_str(&format!(
            "[[api_tokens]]\nname = \"{}\"\nrole = \"{}\"\ntoken_file = \"{}\"\n\n",
            t.name, t.role, t.file
        ));
    }
    let config = dir.join(config_name);
    std::fs::write(&config, text).map_err(Error::file("cannot write", &config))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn tokens_are_written_private_and_named_by_the_config() {
        let dir = crate::temp_dir("tenure-tokens-test-").unwrap();
        let secret = random_secret();
        assert_eq!(secret.len(), 64);
        assert_ne!(secret, random_secret());
        let tokens = [
            ApiToken { name: "a", role: "admin", file: "a.token", secret: &secret },
            ApiToken { name: "r", role: "read", file: "r.token", secret: "r-secret" },
        ];
        let config = write_api_config(dir.path(), "api.toml", &tokens).unwrap();
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.contains("name = \"r\"\nrole = \"read\"\ntoken_file = \"r.token\""), "{text}");
        assert_eq!(std::fs::read_to_string(dir.path().join("a.token")).unwrap(), secret);
        let mode = std::fs::metadata(dir.path().join("r.token")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A token file is never overwritten.
        let again = write_api_config(dir.path(), "api.toml", &tokens[..1]).unwrap_err();
        assert!(again.to_string().contains("a.token"), "{again}");
    }
}
