//! Headless Chromium for the tests, in its own process group with a fresh profile, optionally
//! driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: Chromium reads
//! commands on fd 3 and writes answers on fd 4, each message a JSON text ended by a NUL byte),
//! so no websocket or extra crate is needed. Dropping it kills the group, and any process that
//! left the group but still names the profile on its command line, then reaps them: the test
//! process is made a child subreaper, because PID 1 here reaps no orphans.

use serde_json::{json, Value};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Longest wait for one DevTools answer.
const CDP_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Browser {
    child: Child,
    profile: tempfile::TempDir,
    /// The DevTools pipe, when launched with [`Browser::drive`].
    devtools: Option<DevTools>,
}

struct DevTools {
    commands: File,
    answers: Receiver<Value>,
    next_id: u64,
    /// The page's flattened session.
    session: String,
}

/// True if Chromium is installed. Missing on CI is a failure (scripts/setup.sh installs it);
/// elsewhere the test is skipped with a note. `OS_SUP_NO_BROWSER=1`: the run is inside a
/// Debian root of another Erlang release (`scripts/test.sh --toolchain`), whose browser tests
/// run on the machine's own.
pub fn chromium_installed() -> bool {
    if std::env::var("OS_SUP_NO_BROWSER").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED: the browser tests run outside `scripts/test.sh --toolchain`");
        return false;
    }
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(
        !ci,
        "{CHROMIUM} is missing on CI: scripts/setup.sh --test installs Debian's chromium \
         (apt-get install -y chromium)"
    );
    eprintln!("SKIPPED: {CHROMIUM} is not installed; run scripts/setup.sh --test to install it");
    false
}

/// A pipe whose two ends are at fds ≥ 10, close-on-exec.
fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    // SAFETY: plain fd syscalls on fds we own.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0, "pipe");
        let high = fds.map(|fd| {
            let moved = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
            libc::close(fd);
            moved
        });
        (high[0], high[1])
    }
}

impl Browser {
    /// Opens `url` and leaves the page alone.
    pub fn launch(url: &str) -> Self {
        Self::spawn(url, &[], None)
    }

    /// Opens `url` in a window of `width`×`height` and attaches to the page over DevTools.
    pub fn drive(url: &str, width: u32, height: u32) -> Self {
        let (command_read, command_write) = pipe();
        let (answer_read, answer_write) = pipe();
        let size = format!("--window-size={width},{height}");
        let mut browser = Self::spawn(
            url,
            &["--remote-debugging-pipe", &size],
            Some((command_read, answer_write)),
        );
        // SAFETY: the child has its copies; these ends are ours alone.
        let (commands, answers) = unsafe {
            libc::close(command_read);
            libc::close(answer_write);
            (
                File::from_raw_fd(command_write),
                File::from_raw_fd(answer_read),
            )
        };
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(answers);
            loop {
                let mut message = Vec::new();
                match reader.read_until(0, &mut message) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if message.last() == Some(&0) {
                            message.pop();
                        }
                        if let Ok(value) = serde_json::from_slice::<Value>(&message) {
                            if tx.send(value).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        });
        browser.devtools = Some(DevTools {
            commands,
            answers: rx,
            next_id: 0,
            session: String::new(),
        });
        let deadline = Instant::now() + CDP_TIMEOUT;
        let target = loop {
            let targets = browser.browser_call("Target.getTargets", json!({}));
            let page = targets["targetInfos"].as_array().and_then(|all| {
                all.iter()
                    .find(|t| t["type"] == "page")
                    .map(|t| t["targetId"].clone())
            });
            if let Some(page) = page {
                break page;
            }
            assert!(Instant::now() < deadline, "chromium opened no page");
            // Clock: paces this poll; the deadline above bounds it.
            std::thread::sleep(Duration::from_millis(100));
        };
        let attached = browser.browser_call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        let session = attached["sessionId"]
            .as_str()
            .expect("a DevTools session")
            .to_string();
        browser.devtools.as_mut().unwrap().session = session;
        browser
    }

    fn spawn(url: &str, extra: &[&str], pipes: Option<(RawFd, RawFd)>) -> Self {
        use std::os::unix::process::CommandExt;
        let profile = tempfile::Builder::new()
            .prefix("os_sup_chromium_")
            .tempdir()
            .expect("tempdir");
        let log = File::create(profile.path().join("chromium.log")).expect("log file");
        // SAFETY: prctl with integer arguments; only changes who reaps our orphans.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        let mut command = Command::new(CHROMIUM);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .args(extra)
            .arg(format!(
                "--user-data-dir={}",
                profile.path().join("data").display()
            ))
            .arg(url)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .process_group(0);
        if let Some((command_read, answer_write)) = pipes {
            // SAFETY: only dup2 between fork and exec; the sources are ≥ 10, so neither
            // overwrites the other.
            unsafe {
                command.pre_exec(move || {
                    if libc::dup2(command_read, 3) < 0 || libc::dup2(answer_write, 4) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command.spawn().expect("spawn chromium");
        Self {
            child,
            profile,
            devtools: None,
        }
    }

    /// What Chromium printed so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.profile.path().join("chromium.log")).unwrap_or_default()
    }

    /// Sends `method` to the browser (`session` `None`), or to the target of `session`.
    fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        let devtools = self
            .devtools
            .as_mut()
            .expect("launched with Browser::drive");
        devtools.next_id += 1;
        let id = devtools.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        devtools
            .commands
            .write_all(&bytes)
            .expect("write to chromium");
        let deadline = Instant::now() + CDP_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(answer) = devtools.answers.recv_timeout(left) else {
                panic!("chromium did not answer {method} within {CDP_TIMEOUT:?}");
            };
            if answer["id"] == json!(id) {
                if let Some(error) = answer.get("error") {
                    panic!("{method} failed: {error}");
                }
                return answer["result"].clone();
            }
        }
    }

    fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
    }

    /// A DevTools command on the page.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let page = self.page_session();
        self.send(method, params, Some(&page))
    }

    fn page_session(&self) -> String {
        let devtools = self
            .devtools
            .as_ref()
            .expect("launched with Browser::drive");
        devtools.session.clone()
    }

    /// Evaluates `expression` in the page (promises awaited); its value as JSON.
    pub fn eval(&mut self, expression: &str) -> Value {
        self.eval_in(None, expression)
    }

    /// Evaluates `expression` in the frame of session `frame` (see [`Browser::frame_session`]),
    /// or in the page when `None`.
    pub fn eval_in(&mut self, frame: Option<&str>, expression: &str) -> Value {
        let params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
        let session = frame.map_or_else(|| self.page_session(), String::from);
        let result = self.send("Runtime.evaluate", params, Some(&session));
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("the page threw evaluating {expression}: {exception}");
        }
        result["result"]["value"].clone()
    }

    /// A DevTools session on the page's newest frame: a sandboxed frame (an origin of its
    /// own) runs out of the page's process, a target of its own, which the page's scripts
    /// cannot reach into. Attach once the frame shows the document to read.
    pub fn frame_session(&mut self) -> String {
        let targets = self.browser_call("Target.getTargets", json!({}));
        let frames = targets["targetInfos"].as_array().into_iter().flatten();
        let frame = frames
            .rev()
            .find(|t| t["type"] == "iframe")
            .unwrap_or_else(|| panic!("the page has no frame of its own: {targets}"))
            .clone();
        let attached = self.browser_call(
            "Target.attachToTarget",
            json!({"targetId": frame["targetId"], "flatten": true}),
        );
        attached["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("not attached to {frame}: {attached}"))
            .to_string()
    }

    /// Evaluates `expression` every 50 ms until it is truthy; how long that took, or `None`
    /// after `limit`.
    pub fn wait_for(&mut self, expression: &str, limit: Duration) -> Option<Duration> {
        self.wait_for_in(None, expression, limit)
    }

    /// [`Browser::wait_for`] in the frame of session `frame`.
    pub fn wait_for_in(
        &mut self,
        frame: Option<&str>,
        expression: &str,
        limit: Duration,
    ) -> Option<Duration> {
        let started = Instant::now();
        loop {
            let value = self.eval_in(frame, expression);
            let truthy = !matches!(value, Value::Null | Value::Bool(false))
                && value != json!(0)
                && value != json!("");
            if truthy {
                return Some(started.elapsed());
            }
            if started.elapsed() > limit {
                return None;
            }
            // Clock: paces this poll; `limit` bounds it.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A PNG of the page as it is shown.
    pub fn screenshot(&mut self) -> Vec<u8> {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}));
        base64_decode(shot["data"].as_str().expect("screenshot data"))
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
        .map(value)
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, d)| n | (*d as u32) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

impl Drop for Browser {
    fn drop(&mut self) {
        let group = self.child.id() as i32;
        unsafe { libc::killpg(group, libc::SIGKILL) };
        let profile = self.profile.path().to_string_lossy().into_owned();
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains(&profile) {
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        let _ = self.child.wait();
        // Chromium's helpers, orphaned by the kill, are ours to reap now.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let pid = unsafe { libc::waitpid(-group, std::ptr::null_mut(), libc::WNOHANG) };
            if pid < 0 || (pid == 0 && Instant::now() > deadline) {
                break;
            }
            if pid == 0 {
                // Clock: paces this poll; the deadline above bounds it.
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}
