//! What the state dir keeps of this server's nodes for the next server (`--state-dir`): one
//! record per node (`nodes/NAME.json`, its spec without a secret, its cluster, whether it was
//! up; `nodes/NAME.attached.json` for a node it attached to, without its cookie), its log on disk (`logs/`, written by [`crate::node::logs`]), and the lock that keeps
//! a second server out (`server.lock`, [`lock`]).
//!
//! This file owns the records: read (a file it cannot trust is set aside, renamed, with a
//! message saying why, never deleted or guessed at), then written as nodes start, change and
//! go, each to a new temp file renamed over the old (a crash at any instant leaves the old
//! record or the new one), 0600 in a 0700 directory. Writes happen on a thread of their own:
//! a state change is noted under the node's lock and must not wait for a disk.

mod lock;
pub mod record;

pub use lock::ServerLock;
pub use record::{AttachedRecord, Membership, NodeRecord, SavedSpec};

use crate::node::child_config::{validate_name, NodeConfig};
use crate::node::private_file::{check_private, write_private};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// What a new server finds in its state dir.
pub struct Loaded {
    /// The records it could read, by name.
    pub records: Vec<NodeRecord>,
    /// The nodes it had attached to.
    pub attached: Vec<AttachedRecord>,
    /// How the server before ended (`the server that ran it ended at T: …`).
    pub previous: String,
    /// One line per file set aside, naming it and why.
    pub set_aside: Vec<String>,
}

/// The records of one server's nodes, written as they change.
pub struct NodeStore {
    dir: PathBuf,
    shared: Arc<Shared>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    /// Held while a record's file is written or deleted, so that a write never brings back
    /// a record forgotten meanwhile.
    files: Mutex<()>,
    lock: ServerLock,
    nodes_dir: PathBuf,
}

#[derive(Default)]
struct Pending {
    records: BTreeMap<String, NodeRecord>,
    dirty: BTreeSet<String>,
    /// Shutting down: nodes stopped now were up when the server ended.
    frozen: bool,
    closed: bool,
}

fn private_dir(path: &Path) -> Result<(), String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

impl NodeStore {
    /// Takes `dir` for this server (refused when another server holds it) and reads what the
    /// servers before left there.
    pub fn open(dir: &Path) -> Result<(Arc<Self>, Loaded), String> {
        private_dir(dir)?;
        check_private(dir).map_err(|e| format!("state directory {}: {e}", dir.display()))?;
        let (lock, previous) = ServerLock::take(dir)?;
        let nodes_dir = dir.join("nodes");
        private_dir(&nodes_dir)?;
        private_dir(&dir.join("logs"))?;
        let (records, attached, set_aside) = read_records(&nodes_dir);
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                records: records
                    .iter()
                    .map(|r| (r.name.clone(), r.clone()))
                    .collect(),
                ..Pending::default()
            }),
            wake: Condvar::new(),
            files: Mutex::new(()),
            lock,
            nodes_dir,
        });
        let writer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("os_sup-records".into())
                .spawn(move || shared.write_loop())
                .map_err(|e| format!("cannot start the records' writer: {e}"))?
        };
        let store = Arc::new(Self {
            dir: dir.to_path_buf(),
            shared,
            writer: Mutex::new(Some(writer)),
        });
        let previous = previous.unwrap_or_else(|| {
            "the server that ran it ended at an unknown time (its server.lock is gone)".into()
        });
        Ok((
            store,
            Loaded {
                records,
                attached,
                previous,
                set_aside,
            },
        ))
    }

    /// Where the nodes' logs are kept.
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// Node `config.name` has this config, and is `up` (running, starting or restarting) or
    /// not. Ignored once the server shuts down.
    pub fn node_changed(&self, config: &NodeConfig, up: bool) {
        self.update(&config.name, |record| {
            let spec = SavedSpec::of(config);
            match record {
                Some(record) => {
                    record.spec = spec;
                    record.up = up;
                }
                None => {
                    *record = Some(NodeRecord {
                        version: record::VERSION,
                        name: config.name.clone(),
                        spec,
                        cluster: None,
                        up,
                    })
                }
            }
        });
    }

    /// Node `name` is a member of a cluster.
    pub fn joined(&self, name: &str, membership: Membership) {
        self.update(name, |record| {
            if let Some(record) = record {
                record.cluster = Some(membership);
            }
        });
    }

    fn update(&self, name: &str, change: impl FnOnce(&mut Option<NodeRecord>)) {
        let mut pending = self.shared.pending.lock().expect("records lock");
        if pending.frozen {
            return;
        }
        let mut record = pending.records.remove(name);
        change(&mut record);
        if let Some(record) = record {
            pending.records.insert(name.to_string(), record);
            pending.dirty.insert(name.to_string());
            self.shared.wake.notify_one();
        }
    }

    /// Node `name` is attached (to Erlang node `node`, reached at `address`); written at once.
    pub fn attached(&self, name: &str, node: &str, address: Option<&str>) {
        let record = AttachedRecord {
            version: record::VERSION,
            name: name.to_string(),
            node: node.to_string(),
            address: address.map(str::to_string),
        };
        let _files = self.shared.files.lock().expect("files lock");
        let path = self.shared.nodes_dir.join(format!("{name}.attached.json"));
        let written = serde_json::to_vec_pretty(&record)
            .map_err(std::io::Error::from)
            .and_then(|json| write_private(&path, &json));
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), "cannot write the node's record: {e}");
        }
    }

    /// Forgets node `name`: its record and its logs (`remove`).
    pub fn forget(&self, name: &str) {
        let _files = self.shared.files.lock().expect("files lock");
        {
            let mut pending = self.shared.pending.lock().expect("records lock");
            pending.records.remove(name);
            pending.dirty.remove(name);
        }
        let _ = std::fs::remove_file(self.shared.nodes_dir.join(format!("{name}.json")));
        let _ = std::fs::remove_file(self.shared.nodes_dir.join(format!("{name}.attached.json")));
        crate::node::logs::remove_disk_log(&self.log_dir(), name);
    }

    /// The server shuts down: the nodes it stops now stay recorded as they were.
    pub fn freeze(&self) {
        self.shared.pending.lock().expect("records lock").frozen = true;
    }

    /// Writes what is pending, then how the server ended (`how`); the store writes no more.
    pub fn close(&self, how: &str) {
        {
            let mut pending = self.shared.pending.lock().expect("records lock");
            pending.closed = true;
            self.shared.wake.notify_one();
        }
        if let Some(writer) = self.writer.lock().expect("writer lock").take() {
            let _ = writer.join();
        }
        self.shared.lock.ended(how);
    }
}

impl Shared {
    /// Writes dirty records until closed; touches the lock while idle.
    fn write_loop(&self) {
        let mut beaten = std::time::Instant::now();
        loop {
            let dirty = {
                let mut pending = self.pending.lock().expect("records lock");
                while pending.dirty.is_empty() && !pending.closed {
                    let (next, _) = self
                        .wake
                        .wait_timeout(pending, lock::BEAT_EVERY)
                        .expect("records lock");
                    pending = next;
                    // Also when records keep changing (a node in a crash loop).
                    if beaten.elapsed() >= lock::BEAT_EVERY {
                        self.lock.beat();
                        beaten = std::time::Instant::now();
                    }
                }
                if pending.dirty.is_empty() {
                    return;
                }
                std::mem::take(&mut pending.dirty)
            };
            for name in dirty {
                let _files = self.files.lock().expect("files lock");
                let record = self
                    .pending
                    .lock()
                    .expect("records lock")
                    .records
                    .get(&name)
                    .cloned();
                let Some(record) = record else { continue };
                let path = self.nodes_dir.join(format!("{name}.json"));
                let written = serde_json::to_vec_pretty(&record)
                    .map_err(std::io::Error::from)
                    .and_then(|json| write_private(&path, &json));
                if let Err(e) = written {
                    tracing::warn!(path = %path.display(), "cannot write the node's record: {e}");
                }
            }
        }
    }
}

/// Every record in `dir` it can trust (started nodes, attached ones), and one line per file
/// it set aside.
fn read_records(dir: &Path) -> (Vec<NodeRecord>, Vec<AttachedRecord>, Vec<String>) {
    let mut records = Vec::new();
    let mut attached = Vec::new();
    let mut set_aside = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (records, attached, set_aside);
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if file_name.ends_with(".tmp") {
            // A write cut short: the record it was to replace is still there.
            let _ = std::fs::remove_file(&path);
            continue;
        }
        if let Some(stem) = file_name.strip_suffix(".attached.json") {
            match read_attached(&path, stem) {
                Ok(record) => attached.push(record),
                Err(why) => set_aside.push(put_aside(&path, &why)),
            }
            continue;
        }
        let Some(stem) = file_name.strip_suffix(".json") else {
            continue; // set aside before, or not ours
        };
        match read_record(&path, stem) {
            Ok(record) => records.push(record),
            Err(why) => set_aside.push(put_aside(&path, &why)),
        }
    }
    // A name both started and attached (edited by hand): the started node's record wins.
    attached.retain(|a| !records.iter().any(|r| r.name == a.name));
    (records, attached, set_aside)
}

/// The record in `path`, or why it cannot be trusted.
fn read_record(path: &Path, stem: &str) -> Result<NodeRecord, String> {
    let record = read_versioned(path, stem, |r: &NodeRecord| &r.name)?;
    record.spec.to_config(stem)?;
    Ok(record)
}

/// The record of an attached node in `path`, or why it cannot be trusted.
fn read_attached(path: &Path, stem: &str) -> Result<AttachedRecord, String> {
    read_versioned(path, stem, |r: &AttachedRecord| &r.name)
}

/// A record of this server's format in `path`, the file of node `stem` (which `name_of`
/// the record must name), or why not.
fn read_versioned<T: serde::de::DeserializeOwned>(
    path: &Path,
    stem: &str,
    name_of: fn(&T) -> &str,
) -> Result<T, String> {
    if validate_name(stem).is_err() {
        return Err("its name is no node name".into());
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let versioned: record::Versioned = serde_json::from_slice(&bytes).map_err(|e| {
        if e.is_eof() {
            format!("truncated: it ends in the middle of a record ({e})")
        } else {
            format!("not a node record: {e}")
        }
    })?;
    if versioned.version != record::VERSION {
        return Err(format!(
            "written in record format {} (an older or newer os_sup_mcp); this server reads \
             format {}",
            versioned.version,
            record::VERSION
        ));
    }
    let record: T =
        serde_json::from_slice(&bytes).map_err(|e| format!("not a node record: {e}"))?;
    if name_of(&record) != stem {
        return Err(format!(
            "it names node `{}` but is the file of `{stem}`",
            name_of(&record)
        ));
    }
    Ok(record)
}

/// Renames `path` aside (`NAME.json.set-aside-SECONDS`); the line that says so.
fn put_aside(path: &Path, why: &str) -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let aside = path.with_extension(format!("json.set-aside-{seconds}"));
    match std::fs::rename(path, &aside) {
        Ok(()) => format!(
            "set aside {} (renamed {}): {why}",
            path.display(),
            aside.display()
        ),
        Err(e) => format!(
            "ignored {} ({why}); it could not be renamed aside: {e}",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state dir as a server needs it: only its owner may enter it.
    fn private() -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    fn store_in(dir: &Path) -> (Arc<NodeStore>, Loaded) {
        NodeStore::open(dir).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn records_are_written_as_nodes_change_and_read_back_by_the_next_server() {
        let dir = private();
        let (store, loaded) = store_in(dir.path());
        assert!(loaded.records.is_empty() && loaded.set_aside.is_empty());
        let mut web = NodeConfig::mix("web", "/srv/web");
        web.env.insert("TOKEN".into(), "secret".into());
        store.node_changed(&web, true);
        store.node_changed(&NodeConfig::mix("db-1", "/srv/db"), false);
        store.joined(
            "db-1",
            Membership {
                name: "db".into(),
                index: 1,
                connect: true,
            },
        );
        store.node_changed(&NodeConfig::mix("gone", "/srv/gone"), true);
        store.forget("gone");
        store.freeze();
        store.node_changed(&web, false);
        store.close("exited 0");
        drop(store);
        let text = std::fs::read_to_string(dir.path().join("nodes/web.json")).unwrap();
        assert!(!text.contains("secret") && text.contains("TOKEN"), "{text}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("nodes/web.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        let (_next, loaded) = store_in(dir.path());
        let names: Vec<&str> = loaded.records.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["db-1", "web"]);
        assert!(loaded.records[1].up, "frozen: still up as the server ended");
        assert_eq!(loaded.records[0].cluster.as_ref().unwrap().name, "db");
        assert!(
            loaded.previous.ends_with(": exited 0"),
            "{}",
            loaded.previous
        );
    }

    #[test]
    fn untrusted_records_are_set_aside_with_the_reason() {
        let dir = private();
        let (store, _) = store_in(dir.path());
        store.node_changed(&NodeConfig::mix("good", "/srv/good"), true);
        store.close("exited 0");
        drop(store);
        let nodes = dir.path().join("nodes");
        let good = std::fs::read_to_string(nodes.join("good.json")).unwrap();
        std::fs::write(nodes.join("cut.json"), &good[..good.len() / 2]).unwrap();
        std::fs::write(nodes.join("junk.json"), "hello, I was edited by hand").unwrap();
        std::fs::write(
            nodes.join("old.json"),
            good.replace("\"version\": 1", "\"version\": 0"),
        )
        .unwrap();
        std::fs::write(nodes.join("other.json"), &good).unwrap();
        std::fs::write(nodes.join("x.0123.tmp"), "half").unwrap();
        let (_store, loaded) = store_in(dir.path());
        assert_eq!(loaded.records.len(), 1);
        let lines = loaded.set_aside.join("\n");
        assert_eq!(loaded.set_aside.len(), 4, "{lines}");
        for expected in [
            "cut.json (renamed",
            "truncated",
            "junk.json (renamed",
            "not a node record",
            "record format 0",
            "names node `good` but is the file of `other`",
        ] {
            assert!(lines.contains(expected), "{expected}: {lines}");
        }
        let left: Vec<String> = std::fs::read_dir(&nodes)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            left.iter().any(|n| n.starts_with("junk.json.set-aside-")),
            "{left:?}"
        );
        assert!(!left.iter().any(|n| n.ends_with(".tmp")), "{left:?}");
    }
}
