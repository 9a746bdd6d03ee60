//! The argument spec: what options a module takes, the Rust twin of `AnsibleModule(argument_spec=…)`.
//!
//! Specs are plain data built with small constructors, so a module's whole interface reads top to
//! bottom in one function and can be compared with its sidecar documentation (see [`crate::sidecar`]).

use serde_json::{json, Map, Value};

/// Ansible's option types (the subset binary modules need).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
    /// A string with `~` and `$VARS` expanded.
    Path,
    /// Anything, unconverted.
    Raw,
    /// A JSON document: strings are kept, lists and dicts are serialised.
    Json,
}

impl Type {
    /// The name Ansible uses in `argument_spec` and in the docs.
    pub fn ansible_name(self) -> &'static str {
        match self {
            Type::Str => "str",
            Type::Int => "int",
            Type::Float => "float",
            Type::Bool => "bool",
            Type::List => "list",
            Type::Dict => "dict",
            Type::Path => "path",
            Type::Raw => "raw",
            Type::Json => "json",
        }
    }
}

/// One option of a module (or a sub-option of a `dict`/`list` option).
#[derive(Debug, Clone)]
pub struct Opt {
    pub name: &'static str,
    pub ty: Type,
    pub required: bool,
    pub default: Option<Value>,
    pub choices: Vec<Value>,
    pub aliases: Vec<&'static str>,
    pub no_log: bool,
    /// For a free-form `dict` (no sub-options): the keys, at any depth, whose values are `no_log`
    /// (`extra_config.cipassword`, a backed-up Secret's `data`), the rest of it shown as given.
    pub no_log_keys: Vec<&'static str>,
    /// Environment variables consulted, in order, when the option is not given.
    pub env_fallback: Vec<&'static str>,
    /// For `list`: the type of each element.
    pub elements: Option<Type>,
    /// For `dict`, or `list` of `dict`: the sub-options.
    pub options: Option<Box<ArgSpec>>,
}

impl Opt {
    pub fn new(name: &'static str, ty: Type) -> Self {
        Opt {
            name,
            ty,
            required: false,
            default: None,
            choices: Vec::new(),
            aliases: Vec::new(),
            no_log: false,
            no_log_keys: Vec::new(),
            env_fallback: Vec::new(),
            elements: None,
            options: None,
        }
    }
    pub fn str(name: &'static str) -> Self {
        Self::new(name, Type::Str)
    }
    pub fn int(name: &'static str) -> Self {
        Self::new(name, Type::Int)
    }
    pub fn float(name: &'static str) -> Self {
        Self::new(name, Type::Float)
    }
    pub fn bool(name: &'static str) -> Self {
        Self::new(name, Type::Bool)
    }
    pub fn path(name: &'static str) -> Self {
        Self::new(name, Type::Path)
    }
    pub fn raw(name: &'static str) -> Self {
        Self::new(name, Type::Raw)
    }
    pub fn dict(name: &'static str) -> Self {
        Self::new(name, Type::Dict)
    }
    pub fn list(name: &'static str, elements: Type) -> Self {
        Self::new(name, Type::List).elements(elements)
    }
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }
    pub fn default(mut self, v: impl Into<Value>) -> Self {
        self.default = Some(v.into());
        self
    }
    pub fn choices<V: Into<Value> + Clone>(mut self, c: &[V]) -> Self {
        self.choices = c.iter().cloned().map(Into::into).collect();
        self
    }
    pub fn aliases(mut self, a: &[&'static str]) -> Self {
        self.aliases = a.to_vec();
        self
    }
    pub fn no_log(mut self) -> Self {
        self.no_log = true;
        self
    }
    /// The values under these keys of this free-form dict are `no_log` (see [`Opt::no_log_keys`]).
    pub fn no_log_keys(mut self, keys: &[&'static str]) -> Self {
        self.no_log_keys = keys.to_vec();
        self
    }
    pub fn env(mut self, vars: &[&'static str]) -> Self {
        self.env_fallback = vars.to_vec();
        self
    }
    pub fn elements(mut self, t: Type) -> Self {
        self.elements = Some(t);
        self
    }
    pub fn options(mut self, spec: ArgSpec) -> Self {
        self.options = Some(Box::new(spec));
        self
    }

    /// Every name this option answers to, canonical name first.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }
}

/// `required_if`: when `key == value`, `requirements` must be given (all of them, or any one when `any`).
#[derive(Debug, Clone)]
pub struct RequiredIf {
    pub key: &'static str,
    pub value: Value,
    pub requirements: Vec<&'static str>,
    pub any: bool,
}

/// A whole argument spec with its cross-option rules.
#[derive(Debug, Clone, Default)]
pub struct ArgSpec {
    pub options: Vec<Opt>,
    pub mutually_exclusive: Vec<Vec<&'static str>>,
    pub required_together: Vec<Vec<&'static str>>,
    pub required_one_of: Vec<Vec<&'static str>>,
    pub required_if: Vec<RequiredIf>,
    /// `required_by`: when the key is given, these must be given too.
    pub required_by: Vec<(&'static str, Vec<&'static str>)>,
}

impl ArgSpec {
    pub fn new(options: Vec<Opt>) -> Self {
        ArgSpec {
            options,
            ..Default::default()
        }
    }
    /// The same spec without environment fallbacks, at every depth: for a controller-side plugin's
    /// backend, whose options Ansible's config system has already resolved from the plugin's
    /// `DOCUMENTATION` (task, variables, environment, `ansible.cfg`), so the binary reads no
    /// environment variable of its own ([`crate::run_plugin`]).
    pub fn without_env_fallbacks(mut self) -> Self {
        for opt in &mut self.options {
            opt.env_fallback.clear();
            if let Some(sub) = opt.options.take() {
                opt.options = Some(Box::new(sub.without_env_fallbacks()));
            }
        }
        self
    }
    pub fn mutually_exclusive(mut self, names: &[&'static str]) -> Self {
        self.mutually_exclusive.push(names.to_vec());
        self
    }
    pub fn required_together(mut self, names: &[&'static str]) -> Self {
        self.required_together.push(names.to_vec());
        self
    }
    pub fn required_one_of(mut self, names: &[&'static str]) -> Self {
        self.required_one_of.push(names.to_vec());
        self
    }
    pub fn required_if(
        mut self,
        key: &'static str,
        value: impl Into<Value>,
        requirements: &[&'static str],
    ) -> Self {
        self.required_if.push(RequiredIf {
            key,
            value: value.into(),
            requirements: requirements.to_vec(),
            any: false,
        });
        self
    }
    pub fn required_if_any(
        mut self,
        key: &'static str,
        value: impl Into<Value>,
        requirements: &[&'static str],
    ) -> Self {
        self.required_if.push(RequiredIf {
            key,
            value: value.into(),
            requirements: requirements.to_vec(),
            any: true,
        });
        self
    }
    pub fn required_by(mut self, key: &'static str, requirements: &[&'static str]) -> Self {
        self.required_by.push((key, requirements.to_vec()));
        self
    }
    /// Add options shared by several modules (connection options, for example).
    pub fn with(mut self, more: Vec<Opt>) -> Self {
        self.options.extend(more);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Opt> {
        self.options.iter().find(|o| o.name == name)
    }

    /// The spec in Ansible's `argument_spec` dict form (what `AnsibleModule` would take).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        for o in &self.options {
            let mut m = Map::new();
            m.insert("type".into(), json!(o.ty.ansible_name()));
            if o.required {
                m.insert("required".into(), json!(true));
            }
            if let Some(d) = &o.default {
                m.insert("default".into(), d.clone());
            }
            if !o.choices.is_empty() {
                m.insert("choices".into(), Value::Array(o.choices.clone()));
            }
            if !o.aliases.is_empty() {
                m.insert("aliases".into(), json!(o.aliases));
            }
            if o.no_log {
                m.insert("no_log".into(), json!(true));
            }
            if let Some(e) = o.elements {
                m.insert("elements".into(), json!(e.ansible_name()));
            }
            if let Some(sub) = &o.options {
                m.insert("options".into(), sub.to_json());
            }
            out.insert(o.name.to_string(), Value::Object(m));
        }
        Value::Object(out)
    }
}
