//! `attach`: take a node this server did not start under a name, so every tool works on it.

use super::status::status_line;
use crate::mcp::output::{failure, success};
use crate::mcp::McpServer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// `app@host`
    pub node: String,
    /// Prefer `cookie_file`/`cookie_env`.
    pub cookie: Option<String>,
    pub cookie_file: Option<String>,
    /// Env var holding it.
    pub cookie_env: Option<String>,
    /// If `node`'s fails: `ip[:epmd_port]`.
    pub host: Option<String>,
}

#[tool_router(router = attach_router, vis = "pub(crate)")]
impl McpServer {
    /// Take a running node this server did not start.
    #[tool(
        name = "attach",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn attach(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let cookie = match resolve_cookie(&input) {
            Ok(cookie) => cookie,
            Err(why) => return Ok(failure(why)),
        };
        Ok(
            match self
                .registry
                .attach_node(&input.name, &input.node, &cookie, input.host)
                .await
            {
                Ok(status) => {
                    let mut text = format!("attached: {}", status_line(&status));
                    let cluster = format!("{}*", input.name);
                    if let Some(members) = self.registry.members(&cluster) {
                        text += &format!(
                            "\nconnected to {} other nodes: cluster `{cluster}` ({}); `status` \
                             of it shows who sees whom, tools that look ask every member (each \
                             attached with this cookie when first asked)",
                            members.len() - 1,
                            members.join(", ")
                        );
                    }
                    success(text, &status)
                }
                Err(e) => e.into(),
            },
        )
    }
}

/// The cookie from whichever of `cookie`, `cookie_file`, `cookie_env` was given. Errors never
/// repeat a file's contents.
fn resolve_cookie(input: &Input) -> Result<String, String> {
    const MAX_COOKIE_BYTES: u64 = 4096;
    let cookie = match (&input.cookie, &input.cookie_file, &input.cookie_env) {
        (Some(cookie), None, None) => cookie.clone(),
        (None, Some(file), None) => {
            let path = expand_home(file);
            let too_big = std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_COOKIE_BYTES);
            if too_big {
                return Err(format!(
                    "cookie_file {file} is larger than {MAX_COOKIE_BYTES} bytes: not a cookie"
                ));
            }
            std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read cookie_file {file}: {e}"))?
        }
        (None, None, Some(var)) => std::env::var(var).map_err(|_| {
            format!(
                "environment variable {var} is not set (or not UTF-8) in the server's environment"
            )
        })?,
        _ => {
            return Err(
                "give exactly one of `cookie_file` (a path the server reads), `cookie_env` \
                        (a variable of the server's environment) or `cookie`"
                    .into(),
            )
        }
    };
    let cookie = cookie.trim().to_string();
    if cookie.is_empty() {
        return Err("the cookie is empty".into());
    }
    Ok(cookie)
}

/// `~/x` → `$HOME/x`, as a shell would.
fn expand_home(path: &str) -> std::path::PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => std::path::Path::new(&home).join(rest),
        _ => path.into(),
    }
}
