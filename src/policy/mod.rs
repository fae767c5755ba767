//! Policies: the YAML schema, where a project's policy is found, how `extends` chains
//! merge, and the engine that turns facts into findings.

pub mod allowlist;
mod as_file;
mod checked;
pub mod enforcement;
mod engine;
mod error;
mod export_folder;
mod glob;
mod host_paths;
mod ip_range;
mod load;
mod network;
mod overlay;
mod overrides;
pub mod packages;
pub mod protected_names;
pub mod reference;
mod schema;
pub mod secrets;
mod shown_name;
mod units;

pub use as_file::to_file_yaml;
pub use engine::{Finding, InputError, Layer, PolicyEngine, Report};
pub use error::PolicyError;
pub use load::{PolicySource, PRESETS, PROJECT_FILE, STARTER_POLICY};
pub use schema::{
    Action, Audit, EngineKind, EnvPolicy, Export, Images, Limits, Matcher, Mount, NetworkMode,
    Outputs, Packages, Policy, PoolSettings, Rule, SessionSettings,
};
pub use units::{ByteSize, HumanDuration};
