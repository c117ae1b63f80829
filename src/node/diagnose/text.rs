//! How the diagnosis writes a number for a person: a duration, a size, a rate. Below every
//! file of `diagnose` that writes a line.

/// `~5.7 h`, `~12 min`, `~40 s`.
pub fn duration_text(seconds: f64) -> String {
    if seconds >= 2.0 * 86400.0 {
        format!("~{:.0} days", seconds / 86400.0)
    } else if seconds >= 2.0 * 3600.0 {
        format!("~{:.1} h", seconds / 3600.0)
    } else if seconds >= 120.0 {
        format!("~{:.0} min", seconds / 60.0)
    } else {
        format!("~{:.0} s", seconds.max(1.0))
    }
}

/// `1.5 MB`, `640 KB`, `12 B`.
pub fn bytes(v: f64) -> String {
    let v = v.abs();
    if v >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GB", v / (1024.0 * 1024.0 * 1024.0))
    } else if v >= 1024.0 * 1024.0 {
        format!("{:.1} MB", v / (1024.0 * 1024.0))
    } else if v >= 1024.0 {
        format!("{:.0} KB", v / 1024.0)
    } else {
        format!("{v:.0} B")
    }
}

/// `1.2 k/s`, `310/s`.
pub fn rate_text(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.1} M/s", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.1} k/s", rate / 1e3)
    } else {
        format!("{rate:.0}/s")
    }
}
