//! Plain `erl` nodes (no Elixir, no Mix) for the tests that need a node this server did not
//! start, or the distribution client alone: one unique name per test process, a random cookie
//! each, killed on drop (also when an assertion fails).

use rand::Rng;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running `erl -noshell` node.
pub struct ErlNode {
    pub child: Child,
    /// `BASE_PID@127.0.0.1`, or `BASE_PID@HOST` for a short name.
    pub name: String,
    pub cookie: String,
}

/// How to start an [`ErlNode`].
pub struct ErlBuilder {
    base: String,
    short: bool,
    helper: bool,
    stdout: bool,
    args: Vec<String>,
    cookie: Option<String>,
}

impl ErlNode {
    /// A node named `BASE_PID@127.0.0.1` (`-name`).
    pub fn build(base: &str) -> ErlBuilder {
        ErlBuilder {
            base: base.to_string(),
            short: false,
            helper: false,
            stdout: false,
            args: Vec::new(),
            cookie: None,
        }
    }
}

impl ErlBuilder {
    /// `-sname BASE_PID` on this host's short name, as users type it.
    pub fn short_name(mut self) -> Self {
        self.short = true;
        self
    }

    /// The helper from `priv/` (the set for this release), started at boot.
    pub fn helper(mut self) -> Self {
        self.helper = true;
        self
    }

    /// stdout piped (to read what the node prints); otherwise dropped.
    pub fn piped_stdout(mut self) -> Self {
        self.stdout = true;
        self
    }

    /// This cookie instead of a random one (nodes of one cluster share theirs).
    pub fn cookie(mut self, cookie: &str) -> Self {
        self.cookie = Some(cookie.to_string());
        self
    }

    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    pub fn start(self) -> ErlNode {
        let id = format!("{}_{}", self.base, std::process::id());
        let cookie = self
            .cookie
            .unwrap_or_else(|| format!("c{:016x}", rand::thread_rng().gen::<u64>()));
        let (flag, name) = if self.short {
            let host = Command::new("hostname")
                .arg("-s")
                .output()
                .expect("hostname");
            let host = String::from_utf8_lossy(&host.stdout).trim().to_string();
            ("-sname", format!("{id}@{host}"))
        } else {
            ("-name", format!("{id}@127.0.0.1"))
        };
        let given = if self.short { id.clone() } else { name.clone() };
        let mut cmd = Command::new("erl");
        cmd.args([flag, &given, "-setcookie", &cookie, "-noshell"]);
        if self.helper {
            cmd.arg("-pa")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("priv"))
                .args(["-eval", "code:load_file(os_sup_boot), os_sup_boot:start()"]);
        }
        super::dies_with_test(&mut cmd);
        let child = cmd
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(if self.stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::null())
            .spawn()
            .expect("erl is installed");
        ErlNode {
            child,
            name,
            cookie,
        }
    }
}

impl ErlNode {
    pub fn signal(&self, signal: i32) {
        super::kill(self.child.id(), signal);
    }

    /// SIGSTOPs the node and waits until it has stopped.
    pub fn freeze(&self) {
        super::freeze(self.child.id());
    }
}

impl Drop for ErlNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
