//! What a publication composes its document with: the host's channel registry and its store's
//! profile, with what that profile's document needs beyond the stored rows (the Memory Core's:
//! the publication's consumer binding). [`Composition::for_store`] is the one check every
//! executor runs before a publication.

use crate::projection::channel::{ChannelRecord, ChannelRegistry};
use crate::projection::document;
use crate::projection::memory_core;
use crate::projection::profile::{ConsumerBinding, Profile};
use crate::projection::target::TargetId;
use crate::time::Millis;

/// What a publication composes its document with.
#[derive(Clone, Copy, Debug)]
pub struct Composition<'r> {
    /// The host's channel registry.
    pub registry: &'r ChannelRegistry,
    /// What the profile's document needs beyond the rows.
    pub form: Form<'r>,
}

/// The profile of a [`Composition`], with what its document needs beyond the stored rows.
#[derive(Clone, Copy, Debug)]
pub enum Form<'r> {
    /// [`Profile::Generic`].
    Generic,
    /// [`Profile::MemoryCore`], with the publication's consumer binding.
    MemoryCore(&'r ConsumerBinding),
}

/// A publication's consumer binding that does not fit its store's profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindingMismatch {
    /// A Memory Core store publishes a binding with every document, and none was given.
    #[error("a store of the Memory Core profile publishes a consumer binding with every document, and none was given")]
    Missing,
    /// A generic store publishes no binding, and one was given.
    #[error("a consumer binding is published only by a store of the Memory Core profile; this store is generic")]
    Unexpected,
}

impl<'r> Composition<'r> {
    /// What a publication on a store of `profile` composes with, given the publication's
    /// consumer binding, if any: every executor asks this one function.
    pub fn for_store(
        profile: Profile,
        registry: &'r ChannelRegistry,
        binding: Option<&'r ConsumerBinding>,
    ) -> Result<Self, BindingMismatch> {
        match (profile, binding) {
            (Profile::Generic, None) => Ok(registry.into()),
            (Profile::MemoryCore, Some(binding)) => Ok(Self::memory_core(registry, binding)),
            (Profile::MemoryCore, None) => Err(BindingMismatch::Missing),
            (Profile::Generic, Some(_)) => Err(BindingMismatch::Unexpected),
        }
    }

    /// A composition of the Memory Core profile.
    pub fn memory_core(registry: &'r ChannelRegistry, binding: &'r ConsumerBinding) -> Self {
        Composition {
            registry,
            form: Form::MemoryCore(binding),
        }
    }

    /// The profile this composition publishes (an executor refuses it on a store of another).
    pub fn profile(&self) -> Profile {
        match self.form {
            Form::Generic => Profile::Generic,
            Form::MemoryCore(_) => Profile::MemoryCore,
        }
    }

    /// The bytes of the document of the grant at `epoch` on `target_id`, composed from the
    /// committed `rows` at broker time `now` in this composition's format (unchecked in size).
    pub(crate) fn compose(
        &self,
        target_id: &TargetId,
        epoch: u64,
        rows: &[ChannelRecord],
        now: Millis,
    ) -> Vec<u8> {
        match self.form {
            Form::Generic => {
                document::compose(target_id, epoch, self.registry, rows, now).to_bytes()
            }
            Form::MemoryCore(binding) => memory_core::compose(target_id, epoch, binding, rows, now),
        }
    }
}

impl<'r> From<&'r ChannelRegistry> for Composition<'r> {
    /// A composition of the generic profile.
    fn from(registry: &'r ChannelRegistry) -> Self {
        Composition {
            registry,
            form: Form::Generic,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_goes_with_the_memory_core_profile_only() {
        let registry = ChannelRegistry::new([]).unwrap();
        let binding = ConsumerBinding::from_json("{}").unwrap();
        let of = |p, b| Composition::for_store(p, &registry, b).map(|c| c.profile());
        assert_eq!(of(Profile::Generic, None), Ok(Profile::Generic));
        assert_eq!(
            of(Profile::MemoryCore, Some(&binding)),
            Ok(Profile::MemoryCore)
        );
        assert_eq!(of(Profile::MemoryCore, None), Err(BindingMismatch::Missing));
        assert_eq!(
            of(Profile::Generic, Some(&binding)),
            Err(BindingMismatch::Unexpected)
        );
    }
}
