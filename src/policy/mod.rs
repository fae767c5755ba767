//! Policies: the YAML schema, where a project's policy is found, how `extends` chains
//! merge, and the engine that turns facts into findings.

pub mod allowlist;
mod checked;
pub mod enforcement;
mod engine;
mod glob;
mod host_paths;
mod ip_range;
mod load;
mod overrides;
pub mod packages;
mod schema;
pub mod secrets;
mod units;

pub use engine::{Finding, InputError, Layer, PolicyEngine, Report};
pub use load::{PolicyError, PolicySource, PRESETS, PROJECT_FILE, STARTER_POLICY};
pub use schema::{
    Action, Audit, EngineKind, EnvPolicy, Export, Images, Limits, Matcher, Mount, NetworkMode,
    Outputs, Packages, Policy, PoolSettings, Rule, SessionSettings,
};
pub use units::{ByteSize, HumanDuration};
