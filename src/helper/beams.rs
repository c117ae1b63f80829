//! The helper's code as shipped: its modules compiled once per OTP release and embedded in the
//! binary ([`BEAMS`]), and written to a private directory that the children this server starts
//! boot from ([`HelperCode`]).

use std::path::Path;

/// The compiled helper from `priv/`, built by `scripts/build_helper.sh`; a test keeps it in
/// step with `erlang/`.
pub const BEAMS: HelperBeams = include!(concat!(env!("OUT_DIR"), "/helper_modules.rs"));

/// The helper as shipped: no one set of beams loads on every OTP release (OTP 29 refuses some
/// beams of OTP 25, OTP 25 every beam of OTP 27), so it is compiled once per set, and a node
/// loads the newest set not newer than its own release.
pub struct HelperBeams {
    /// `os_sup_boot`, compiled by the oldest release: the module a node we start loads first,
    /// which picks the set for the node's release and loads the helper from it.
    pub boot: &'static [u8],
    /// Oldest release first.
    pub sets: &'static [BeamSet],
}

/// Every helper module `(name, beam)` compiled by OTP `otp`.
pub struct BeamSet {
    pub otp: u32,
    pub modules: &'static [(&'static str, &'static [u8])],
}

impl HelperBeams {
    /// The set a node of OTP release `otp` loads: the newest not newer than it, or the oldest
    /// for a node older than every set (which will say what it refuses). The same choice as
    /// `os_sup_boot:set_dir/2`.
    pub fn set_for(&self, otp: u32) -> &'static BeamSet {
        self.sets
            .iter()
            .rev()
            .find(|set| set.otp <= otp)
            .or(self.sets.first())
            .expect("at least one helper set is embedded")
    }
}

/// The helper's `.beam`, written once to a private temporary directory that children load from.
pub struct HelperCode {
    dir: tempfile::TempDir,
}

impl HelperCode {
    /// Writes the modules to a new private directory under `$TMPDIR` (or `/tmp` when
    /// `$TMPDIR` holds whitespace, which would split the boot flags).
    pub fn install() -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        let mut parent = std::env::temp_dir();
        if parent.to_string_lossy().contains(char::is_whitespace) {
            tracing::warn!(tmpdir = %parent.display(), "TMPDIR contains whitespace, which ERL_AFLAGS cannot carry; using /tmp for the helper's code");
            parent = "/tmp".into();
        }
        let dir = tempfile::Builder::new()
            .prefix("os_sup_mcp.")
            .tempdir_in(parent)?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        std::fs::write(dir.path().join("os_sup_boot.beam"), BEAMS.boot)?;
        for set in BEAMS.sets {
            let set_dir = dir.path().join(format!("otp{}", set.otp));
            std::fs::create_dir(&set_dir)?;
            for (module, beam) in set.modules {
                std::fs::write(set_dir.join(format!("{module}.beam")), beam)?;
            }
        }
        Ok(Self { dir })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Emulator flags that load and start the helper at boot: `os_sup_boot` (the one module on
    /// the code path) loads the set made for the node's release by absolute path and starts
    /// it. `ERL_AFLAGS` is split on whitespace with no quoting, so the flags contain no spaces
    /// (the temp dir has none).
    pub fn boot_flags(&self) -> String {
        // Loaded explicitly first: a release boots in embedded mode, which loads nothing on
        // demand.
        format!(
            "-pa {} -eval catch(code:load_file(os_sup_boot)),catch(os_sup_boot:start())",
            self.dir.path().display(),
        )
    }
}
