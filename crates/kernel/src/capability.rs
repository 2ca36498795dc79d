//! Capabilities: what one module lends the others, by type.
//!
//! A capability is a trait object type defined in the kernel (`dyn Authenticator`,
//! `dyn JobQueue`, ...) that implements [`Capability`]. A module declares the capabilities it
//! provides and the ones it uses ([`crate::BuildModule::provides`], [`crate::BuildModule::uses`]);
//! once built, it puts what it provides into the [`Capabilities`] registry
//! ([`crate::Module::provide`]), and every module built after it finds them there
//! ([`crate::Deps::get`]). The composer orders the build from the declarations alone
//! ([`build_order`]): providers before users, a missing required capability or a cycle is a start
//! error naming the modules. Neither the registry nor the composer names a module or a capability:
//! a new capability is a trait and one `impl Capability`, nothing else.
//!
//! Two modules may lend each other something (auth gives comms its authenticator, comms gives
//! auth its mailer). One side of such a pair then uses its capability *late* ([`Use::late`]): it
//! imposes no build order, and the module holds a [`Late`] handle that answers once every module
//! is built ([`Capabilities::seal`]), that is, by the time any request is served.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

/// A trait object type that modules lend each other: `impl Capability for dyn MyTrait`.
pub trait Capability: Send + Sync + 'static {
    /// What error messages and logs call it ("an authenticator", "a mailer").
    const NAME: &'static str;
}

/// A capability named in a module's declarations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CapabilityId {
    id: TypeId,
    pub name: &'static str,
}

impl CapabilityId {
    pub fn of<C: Capability + ?Sized>() -> CapabilityId {
        CapabilityId {
            id: TypeId::of::<C>(),
            name: C::NAME,
        }
    }
}

/// A capability a module uses: required (the module cannot start without it) or optional; at
/// build (its provider is built first) or late (once every module is built, see [`Late`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Use {
    pub capability: CapabilityId,
    pub required: bool,
    pub late: bool,
}

impl Use {
    /// The module works without it (and differently with it); read at build with
    /// [`crate::Deps::get`].
    pub fn optional<C: Capability + ?Sized>() -> Use {
        Use {
            capability: CapabilityId::of::<C>(),
            required: false,
            late: false,
        }
    }

    /// The module cannot start without it; read at build with [`crate::Deps::get`].
    pub fn required<C: Capability + ?Sized>() -> Use {
        Use {
            required: true,
            ..Use::optional::<C>()
        }
    }

    /// Optional, and read when requests are served, through a [`Late`] handle
    /// ([`crate::Deps::late`]): no build order, so its provider may use this module in turn.
    pub fn late<C: Capability + ?Sized>() -> Use {
        Use {
            late: true,
            ..Use::optional::<C>()
        }
    }
}

type Registry = HashMap<TypeId, Arc<dyn Any + Send + Sync>>;

fn lookup<C: Capability + ?Sized>(registry: &Registry) -> Option<Arc<C>> {
    registry
        .get(&TypeId::of::<C>())
        .and_then(|value| value.downcast_ref::<Arc<C>>())
        .cloned()
}

/// A capability used late: empty until every module is built ([`Capabilities::seal`]), then the
/// provider's, if a module provides it.
pub struct Late<C: ?Sized> {
    complete: Arc<OnceLock<Registry>>,
    _capability: PhantomData<fn() -> Arc<C>>,
}

impl<C: Capability + ?Sized> Late<C> {
    /// The capability, once every module is built and when one provides it.
    pub fn get(&self) -> Option<Arc<C>> {
        lookup::<C>(self.complete.get()?)
    }
}

impl<C: ?Sized> Clone for Late<C> {
    fn clone(&self) -> Self {
        Late {
            complete: self.complete.clone(),
            _capability: PhantomData,
        }
    }
}

/// The capabilities provided so far, by type. Clones share the late handles: [`seal`] completes
/// every [`Late`] made from the registry or any of its clones, with what the sealed one holds.
///
/// [`seal`]: Capabilities::seal
#[derive(Clone, Default)]
pub struct Capabilities {
    by_type: Registry,
    complete: Arc<OnceLock<Registry>>,
}

impl Capabilities {
    /// Adds (or replaces) capability `C`.
    pub fn provide<C: Capability + ?Sized>(&mut self, value: Arc<C>) {
        self.by_type.insert(TypeId::of::<C>(), Arc::new(value));
    }

    /// Capability `C`, when a module provides it.
    pub fn get<C: Capability + ?Sized>(&self) -> Option<Arc<C>> {
        lookup::<C>(&self.by_type)
    }

    pub fn has<C: Capability + ?Sized>(&self) -> bool {
        self.by_type.contains_key(&TypeId::of::<C>())
    }

    /// A handle on capability `C` that answers once [`seal`](Capabilities::seal) is called.
    pub fn late<C: Capability + ?Sized>(&self) -> Late<C> {
        Late {
            complete: self.complete.clone(),
            _capability: PhantomData,
        }
    }

    /// Every module is built: the [`Late`] handles answer from now on with what is provided
    /// now. Only the first call counts.
    pub fn seal(&self) {
        let _ = self.complete.set(self.by_type.clone());
    }
}

impl std::fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capabilities")
            .field("count", &self.by_type.len())
            .finish()
    }
}

/// One module's declarations, as the composer orders them.
#[derive(Debug, Clone)]
pub struct Declared {
    pub module: &'static str,
    pub provides: Vec<CapabilityId>,
    pub uses: Vec<Use>,
}

/// Why the modules cannot be composed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompositionError {
    #[error(
        "module {module} needs {capability}, which no mounted module provides: mount one that does, or leave {module} out"
    )]
    Missing {
        module: &'static str,
        capability: &'static str,
    },
    #[error("{capability} is provided by both {first} and {second}: mount only one of them")]
    Twice {
        capability: &'static str,
        first: &'static str,
        second: &'static str,
    },
    #[error("modules {} need each other's capabilities: {}", modules.join(", "), links.join("; "))]
    Cycle {
        modules: Vec<&'static str>,
        links: Vec<String>,
    },
}

/// The build order of `modules` (indexes into it): every module after the providers of the
/// capabilities it uses, otherwise in the given order.
pub fn build_order(modules: &[Declared]) -> Result<Vec<usize>, CompositionError> {
    let mut provider: HashMap<CapabilityId, usize> = HashMap::new();
    for (index, module) in modules.iter().enumerate() {
        for capability in &module.provides {
            if let Some(&first) = provider.get(capability) {
                return Err(CompositionError::Twice {
                    capability: capability.name,
                    first: modules[first].module,
                    second: module.module,
                });
            }
            provider.insert(*capability, index);
        }
    }
    // What each module waits for: the providers of what it uses (itself excepted).
    let mut waits: Vec<Vec<(usize, &'static str)>> = Vec::with_capacity(modules.len());
    for module in modules {
        let mut needs = Vec::new();
        for used in &module.uses {
            match provider.get(&used.capability) {
                Some(&p) if modules[p].module != module.module && !used.late => {
                    needs.push((p, used.capability.name))
                }
                Some(_) => {}
                None if used.required => {
                    return Err(CompositionError::Missing {
                        module: module.module,
                        capability: used.capability.name,
                    });
                }
                None => {}
            }
        }
        waits.push(needs);
    }
    let mut order = Vec::with_capacity(modules.len());
    let mut built = vec![false; modules.len()];
    while order.len() < modules.len() {
        let next =
            (0..modules.len()).find(|&i| !built[i] && waits[i].iter().all(|(p, _)| built[*p]));
        let Some(next) = next else {
            let stuck: Vec<usize> = (0..modules.len()).filter(|&i| !built[i]).collect();
            return Err(CompositionError::Cycle {
                modules: stuck.iter().map(|&i| modules[i].module).collect(),
                links: stuck
                    .iter()
                    .flat_map(|&i| {
                        waits[i]
                            .iter()
                            .filter(|(p, _)| !built[*p])
                            .map(move |(p, name)| {
                                format!(
                                    "{} uses {name} from {}",
                                    modules[i].module, modules[*p].module
                                )
                            })
                    })
                    .collect(),
            });
        };
        built[next] = true;
        order.push(next);
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    trait Greeter: Send + Sync {
        fn hello(&self) -> &'static str;
    }
    impl Capability for dyn Greeter {
        const NAME: &'static str = "a greeter";
    }
    trait Counter: Send + Sync {}
    impl Capability for dyn Counter {
        const NAME: &'static str = "a counter";
    }

    struct English;
    impl Greeter for English {
        fn hello(&self) -> &'static str {
            "hello"
        }
    }

    #[test]
    fn the_registry_hands_back_what_was_provided_by_type() {
        let mut registry = Capabilities::default();
        assert!(registry.get::<dyn Greeter>().is_none());
        registry.provide::<dyn Greeter>(Arc::new(English));
        assert_eq!(
            registry.get::<dyn Greeter>().map(|g| g.hello()),
            Some("hello")
        );
        assert!(registry.has::<dyn Greeter>() && !registry.has::<dyn Counter>());
        let copy = registry.clone();
        assert!(copy.get::<dyn Greeter>().is_some());
    }

    #[test]
    fn late_handles_answer_once_sealed_with_what_was_provided_by_then() {
        let mut registry = Capabilities::default();
        let early = registry.late::<dyn Greeter>();
        // A module built before the provider keeps a copy of the registry of its time.
        let copy_before = registry.clone();
        registry.provide::<dyn Greeter>(Arc::new(English));
        assert!(early.get().is_none(), "not sealed yet");
        registry.seal();
        assert_eq!(early.get().map(|g| g.hello()), Some("hello"));
        let from_copy = copy_before.late::<dyn Greeter>();
        assert_eq!(from_copy.get().map(|g| g.hello()), Some("hello"));
        assert!(registry.late::<dyn Counter>().get().is_none());
    }

    fn module(name: &'static str, provides: &[CapabilityId], uses: &[Use]) -> Declared {
        Declared {
            module: name,
            provides: provides.to_vec(),
            uses: uses.to_vec(),
        }
    }

    #[test]
    fn providers_are_built_before_their_users_and_the_rest_keep_their_order() {
        let greeter = CapabilityId::of::<dyn Greeter>();
        let counter = CapabilityId::of::<dyn Counter>();
        let modules = [
            module("blog", &[], &[Use::optional::<dyn Greeter>()]),
            module("auth", &[greeter], &[Use::optional::<dyn Counter>()]),
            module("ai", &[], &[Use::required::<dyn Greeter>()]),
            module("payment", &[counter], &[]),
        ];
        let order: Vec<&str> = build_order(&modules)
            .map(|o| o.into_iter().map(|i| modules[i].module).collect())
            .unwrap_or_default();
        assert_eq!(order, ["payment", "auth", "blog", "ai"]);
        // An optional capability nobody provides is no obstacle.
        let alone = [module("blog", &[], &[Use::optional::<dyn Greeter>()])];
        assert_eq!(build_order(&alone), Ok(vec![0]));
    }

    #[test]
    fn a_missing_requirement_a_cycle_or_two_providers_is_an_error_naming_the_modules() {
        let greeter = CapabilityId::of::<dyn Greeter>();
        let counter = CapabilityId::of::<dyn Counter>();
        let missing = [module("ai", &[], &[Use::required::<dyn Counter>()])];
        assert_eq!(
            build_order(&missing).map_err(|e| e.to_string()),
            Err(
                "module ai needs a counter, which no mounted module provides: mount one that \
                 does, or leave ai out"
                    .to_owned()
            )
        );
        let cycle = [
            module("auth", &[greeter], &[Use::optional::<dyn Counter>()]),
            module("comms", &[counter], &[Use::optional::<dyn Greeter>()]),
        ];
        assert_eq!(
            build_order(&cycle).map_err(|e| e.to_string()),
            Err(
                "modules auth, comms need each other's capabilities: auth uses a counter from \
                 comms; comms uses a greeter from auth"
                    .to_owned()
            )
        );
        // One late use breaks the cycle: comms is built first, auth finds its counter late.
        let broken = [
            module("auth", &[greeter], &[Use::late::<dyn Counter>()]),
            module("comms", &[counter], &[Use::optional::<dyn Greeter>()]),
        ];
        assert_eq!(build_order(&broken), Ok(vec![0, 1]));
        let twice = [module("a", &[greeter], &[]), module("b", &[greeter], &[])];
        assert!(matches!(
            build_order(&twice),
            Err(CompositionError::Twice {
                first: "a",
                second: "b",
                ..
            })
        ));
    }
}
