//! The `network:` key: no network, the engine's bridge, or an allowlist of hosts that
//! the egress proxy lets through. Its own module so that the schema and the checks made
//! while a file is read both use it without depending on each other.

/// How a sandbox may reach the network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NetworkMode {
    /// No network interface but loopback.
    #[default]
    None,
    /// The engine's default bridge: outbound access to wherever the host can reach.
    Bridge,
    /// Only these hosts, through the server's egress proxy (`network: { allow: [...] }`).
    Allow(Vec<super::allowlist::HostRule>),
}

impl NetworkMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            NetworkMode::None => "none",
            NetworkMode::Bridge => "bridge",
            NetworkMode::Allow(_) => "allowlist",
        }
    }

    /// Whether code may reach `host:port` at all under this mode.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        match self {
            NetworkMode::None => false,
            NetworkMode::Bridge => true,
            NetworkMode::Allow(list) => super::allowlist::allows(list, host, port),
        }
    }
}

impl serde::Serialize for NetworkMode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            NetworkMode::Allow(list) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("allow", list)?;
                map.end()
            }
            other => serializer.serialize_str(other.as_str()),
        }
    }
}

/// For the policy reference.
impl schemars::JsonSchema for NetworkMode {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NetworkMode".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "oneOf": [
                { "enum": ["none", "bridge"] },
                {
                    "type": "object",
                    "properties": { "allow": { "type": "array", "items": { "type": "string" } } },
                },
            ],
            "x-type": "`none` | `bridge` | `{ allow: [hosts] }`",
        })
    }
}
