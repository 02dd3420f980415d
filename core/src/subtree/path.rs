//! Component ids, absolute root→node subtree paths, their derivation from a parent lookup, and
//! the overlap relation.
//!
//! A [`SubtreePath`] is the list of component ids from the tree's root down to one node. Overlap
//! is the prefix relation on whole segments (ancestor, descendant or equal), so `/a/b` overlaps
//! `/a/b/c` but not `/a/bc`. Prefix overlap is only sound on root-anchored paths, which is why
//! [`derive_subtree_path`] is the one way from a component id to a path: it walks the parents to
//! the root and fails closed (returns `None`) on anything it cannot walk cleanly.

use std::collections::HashSet;
use std::fmt;

/// Largest number of bytes of one component id.
pub const MAX_COMPONENT_ID_BYTES: usize = 128;
/// Largest number of components of a subtree path (root included). A parent chain longer than
/// this is treated as corrupt, not walked further.
pub const MAX_SUBTREE_DEPTH: usize = 256;

/// Why a component id or a subtree path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// A component id is empty (also: an empty segment such as `//` in a path).
    #[error("component id is empty")]
    EmptyId,
    /// A component id is longer than [`MAX_COMPONENT_ID_BYTES`].
    #[error("component id is longer than {MAX_COMPONENT_ID_BYTES} bytes")]
    IdTooLong,
    /// A component id contains `/`, whitespace or a control character.
    #[error("component id `{0}` contains `/`, whitespace or a control character")]
    IdInvalidChar(String),
    /// A path in text form does not start with `/`.
    #[error("subtree path `{0}` is not absolute (it must start with `/`)")]
    NotAbsolute(String),
    /// A path has no component.
    #[error("subtree path has no component")]
    Empty,
    /// A path has more than [`MAX_SUBTREE_DEPTH`] components.
    #[error("subtree path is deeper than {MAX_SUBTREE_DEPTH} components")]
    TooDeep,
    /// A path names the same component twice (a parent cycle).
    #[error("subtree path repeats component `{0}`")]
    RepeatedId(String),
}

/// One component id: 1 to [`MAX_COMPONENT_ID_BYTES`] bytes, no `/`, whitespace or control
/// character.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComponentId(String);

impl ComponentId {
    /// Parses a component id.
    pub fn parse(text: &str) -> Result<Self, PathError> {
        if text.is_empty() {
            return Err(PathError::EmptyId);
        }
        if text.len() > MAX_COMPONENT_ID_BYTES {
            return Err(PathError::IdTooLong);
        }
        if text
            .chars()
            .any(|c| c == '/' || c.is_whitespace() || c.is_control())
        {
            return Err(PathError::IdInvalidChar(text.to_owned()));
        }
        Ok(ComponentId(text.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ComponentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An absolute root→node path of component ids: non-empty, at most [`MAX_SUBTREE_DEPTH`] deep,
/// no id repeated. Ordered component-wise, so every descendant of a path sorts after it and
/// before any path that is not its descendant.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubtreePath(Vec<ComponentId>);

impl SubtreePath {
    /// Builds a path from its components, root first.
    pub fn new(components: Vec<ComponentId>) -> Result<Self, PathError> {
        if components.is_empty() {
            return Err(PathError::Empty);
        }
        if components.len() > MAX_SUBTREE_DEPTH {
            return Err(PathError::TooDeep);
        }
        let mut seen = HashSet::with_capacity(components.len());
        for c in &components {
            if !seen.insert(c) {
                return Err(PathError::RepeatedId(c.0.clone()));
            }
        }
        Ok(SubtreePath(components))
    }

    /// Parses the text form `/root/child/node`.
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let rest = text
            .strip_prefix('/')
            .ok_or_else(|| PathError::NotAbsolute(text.to_owned()))?;
        let components = rest
            .split('/')
            .map(ComponentId::parse)
            .collect::<Result<Vec<_>, _>>()?;
        SubtreePath::new(components)
    }

    /// The components, root first.
    pub fn components(&self) -> &[ComponentId] {
        &self.0
    }

    /// True when `self` is an ancestor of `other` or equal to it (whole segments).
    pub fn contains(&self, other: &SubtreePath) -> bool {
        other.0.starts_with(&self.0)
    }

    /// The first `len` components (`1 <= len <= depth`): an ancestor-or-self of this path.
    pub(super) fn truncated(&self, len: usize) -> SubtreePath {
        SubtreePath(self.0[..len.clamp(1, self.0.len())].to_vec())
    }
}

impl fmt::Display for SubtreePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.0 {
            write!(f, "/{c}")?;
        }
        Ok(())
    }
}

/// True when the two subtrees share a node: one path is an ancestor of the other or they are
/// equal, compared on whole segments.
pub fn overlaps(a: &SubtreePath, b: &SubtreePath) -> bool {
    a.contains(b) || b.contains(a)
}

/// What the host's tree says about one component's parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parent<'t> {
    /// The component is a root of the tree.
    Root,
    /// The component's parent id.
    Id(&'t str),
    /// The component's parent id, owned: for a lookup that cannot lend one (an answer from
    /// another language's callback). The same as [`Parent::Id`].
    OwnedId(String),
    /// The component is not in the tree.
    Unknown,
}

/// Derives the absolute root→node path of `component_id` by walking `parent_of` up to the root.
///
/// Returns `None` — never a partial or corrupt path — when an id on the way is malformed, a
/// component (the target or a parent) is not in the tree, the parents form a cycle, or the chain
/// is deeper than [`MAX_SUBTREE_DEPTH`]. A cycle is noticed on the first repeated id, so
/// `parent_of` is called at most `cycle length + 1` times for it. Segments are kept as spelled;
/// see [`derive_canonical_subtree_path`] for a host whose ids have several spellings.
pub fn derive_subtree_path<'t>(
    component_id: &str,
    parent_of: impl FnMut(&str) -> Parent<'t>,
) -> Option<SubtreePath> {
    derive_canonical_subtree_path(component_id, parent_of, str::to_owned)
}

/// [`derive_subtree_path`] with every segment put in the host's canonical form by `canonical`
/// (e.g. lower-casing, for a host whose lookup is case-insensitive) before it is checked,
/// compared for cycles and stored, so two spellings of one component are one path segment.
/// `parent_of` is asked with the ids as the host spelled them. A canonical form that is not a
/// valid id derives nothing.
pub fn derive_canonical_subtree_path<'t>(
    component_id: &str,
    mut parent_of: impl FnMut(&str) -> Parent<'t>,
    canonical: impl Fn(&str) -> String,
) -> Option<SubtreePath> {
    let canon = |spelled: &str| ComponentId::parse(&canonical(spelled)).ok();
    let start = canon(component_id)?;
    let mut seen = HashSet::from([start.clone()]);
    let mut reversed = vec![start];
    let mut spelled = component_id.to_owned();
    loop {
        let parent = match parent_of(&spelled) {
            Parent::Root => break,
            Parent::Unknown => return None,
            Parent::Id(parent) => parent.to_owned(),
            Parent::OwnedId(parent) => parent,
        };
        if reversed.len() >= MAX_SUBTREE_DEPTH {
            return None;
        }
        let id = canon(&parent)?;
        if !seen.insert(id.clone()) {
            return None;
        }
        reversed.push(id);
        spelled = parent;
    }
    reversed.reverse();
    Some(SubtreePath(reversed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn p(text: &str) -> SubtreePath {
        SubtreePath::parse(text).unwrap()
    }

    /// A tree as child → parent (`None` = root).
    fn lookup<'t>(tree: &'t HashMap<&'t str, Option<&'t str>>) -> impl FnMut(&str) -> Parent<'t> {
        |id| match tree.get(id) {
            None => Parent::Unknown,
            Some(None) => Parent::Root,
            Some(Some(parent)) => Parent::Id(parent),
        }
    }

    #[test]
    fn overlap_is_the_prefix_relation_on_whole_segments() {
        assert!(overlaps(&p("/a/b"), &p("/a/b")));
        assert!(overlaps(&p("/a"), &p("/a/b/c")));
        assert!(overlaps(&p("/a/b/c"), &p("/a")));
        assert!(!overlaps(&p("/a/b"), &p("/a/bc")));
        assert!(!overlaps(&p("/a/bc"), &p("/a/b")));
        assert!(!overlaps(&p("/a/b"), &p("/a/c")));
        assert!(!overlaps(&p("/x/a"), &p("/a")));
    }

    #[test]
    fn derives_the_root_to_node_path() {
        let tree = HashMap::from([("root", None), ("a", Some("root")), ("b", Some("a"))]);
        assert_eq!(
            derive_subtree_path("b", lookup(&tree)),
            Some(p("/root/a/b"))
        );
        assert_eq!(derive_subtree_path("root", lookup(&tree)), Some(p("/root")));
        // A lookup that answers owned ids derives the same paths, and refuses the same cycles.
        let owned = |id: &str| match lookup(&tree)(id) {
            Parent::Id(parent) => Parent::OwnedId(parent.to_owned()),
            other => other,
        };
        assert_eq!(derive_subtree_path("b", owned), Some(p("/root/a/b")));
        let cycle = |id: &str| Parent::OwnedId(if id == "x" { "y" } else { "x" }.to_owned());
        assert_eq!(derive_subtree_path("x", cycle), None);
    }

    #[test]
    fn malformed_id_derives_nothing() {
        let tree = HashMap::from([("root", None), ("a/b", Some("root")), ("", Some("root"))]);
        assert_eq!(derive_subtree_path("a/b", lookup(&tree)), None);
        assert_eq!(derive_subtree_path("", lookup(&tree)), None);
        let bad_parent = HashMap::from([("root", None), ("a", Some("ro ot"))]);
        assert_eq!(derive_subtree_path("a", lookup(&bad_parent)), None);
    }

    #[test]
    fn unknown_component_or_missing_parent_derives_nothing() {
        let tree = HashMap::from([("root", None), ("a", Some("gone"))]);
        assert_eq!(derive_subtree_path("nope", lookup(&tree)), None);
        assert_eq!(derive_subtree_path("a", lookup(&tree)), None);
    }

    #[test]
    fn cycle_derives_nothing_on_the_first_repeat() {
        let tree = HashMap::from([("a", Some("b")), ("b", Some("c")), ("c", Some("a"))]);
        let mut calls = 0;
        let mut walk = lookup(&tree);
        let derived = derive_subtree_path("a", |id| {
            calls += 1;
            walk(id)
        });
        assert_eq!(derived, None);
        assert_eq!(calls, 3, "a 3-cycle is noticed on the first repeated id");
    }

    #[test]
    fn canonical_derivation_makes_spellings_one_segment() {
        let tree = HashMap::from([
            ("App", None),
            ("Panel", Some("app")),
            ("left", Some("PANEL")),
        ]);
        // The host's lookup is case-insensitive, and so is its canonical form.
        let lower = |id: &str| id.to_lowercase();
        let parent = |id: &str| match tree.iter().find(|(k, _)| k.eq_ignore_ascii_case(id)) {
            None => Parent::Unknown,
            Some((_, None)) => Parent::Root,
            Some((_, Some(p))) => Parent::Id(p),
        };
        for spelled in ["left", "LEFT", "Left"] {
            assert_eq!(
                derive_canonical_subtree_path(spelled, parent, lower),
                Some(p("/app/panel/left"))
            );
        }
        // Without it, segments keep the spelling met on the way.
        assert_eq!(
            derive_subtree_path("LEFT", parent),
            Some(p("/app/PANEL/LEFT"))
        );
        // Two spellings of one id on a parent chain are a cycle.
        let cyclic = |id: &str| {
            if id == "a" {
                Parent::Id("A")
            } else {
                Parent::Id("a")
            }
        };
        assert_eq!(derive_canonical_subtree_path("a", cyclic, lower), None);
        // A canonical form that is no valid id derives nothing.
        assert_eq!(
            derive_canonical_subtree_path("left", parent, |_| String::new()),
            None
        );
    }

    #[test]
    fn absurd_depth_derives_nothing() {
        let ids: Vec<String> = (0..=MAX_SUBTREE_DEPTH).map(|i| format!("n{i}")).collect();
        let parent = |id: &str| -> Parent<'_> {
            match ids.iter().position(|x| x == id) {
                Some(0) => Parent::Root,
                Some(i) => Parent::Id(&ids[i - 1]),
                None => Parent::Unknown,
            }
        };
        let deepest = &ids[MAX_SUBTREE_DEPTH];
        assert_eq!(derive_subtree_path(deepest, parent), None);
        let at_bound = derive_subtree_path(&ids[MAX_SUBTREE_DEPTH - 1], parent).unwrap();
        assert_eq!(at_bound.components().len(), MAX_SUBTREE_DEPTH);
    }

    #[test]
    fn text_form_is_absolute_and_strict() {
        assert_eq!(p("/a/b").to_string(), "/a/b");
        assert!(matches!(
            SubtreePath::parse("a/b"),
            Err(PathError::NotAbsolute(_))
        ));
        assert_eq!(SubtreePath::parse("/a//b"), Err(PathError::EmptyId));
        assert_eq!(SubtreePath::parse("/a/"), Err(PathError::EmptyId));
        assert_eq!(SubtreePath::parse("/"), Err(PathError::EmptyId));
        assert_eq!(SubtreePath::new(vec![]), Err(PathError::Empty));
        assert!(matches!(
            SubtreePath::parse("/a/b/a"),
            Err(PathError::RepeatedId(_))
        ));
        let long = "x".repeat(MAX_COMPONENT_ID_BYTES + 1);
        assert_eq!(ComponentId::parse(&long), Err(PathError::IdTooLong));
        assert!(ComponentId::parse(&"x".repeat(MAX_COMPONENT_ID_BYTES)).is_ok());
    }

    #[test]
    fn ids_with_whitespace_or_control_characters_are_refused() {
        for bad in ["a b", "a\tb", "a\u{7f}", "a\nb", "\u{a0}x"] {
            assert_eq!(
                ComponentId::parse(bad),
                Err(PathError::IdInvalidChar(bad.to_owned())),
                "{bad:?}"
            );
        }
        assert_eq!(
            SubtreePath::parse("/a/b c"),
            Err(PathError::IdInvalidChar("b c".to_owned()))
        );
    }

    #[test]
    fn depth_is_bounded_exactly() {
        let ids = |n: usize| (0..n).map(|i| ComponentId::parse(&format!("c{i}")).unwrap());
        assert_eq!(
            SubtreePath::new(ids(MAX_SUBTREE_DEPTH + 1).collect()),
            Err(PathError::TooDeep)
        );
        let deepest = SubtreePath::new(ids(MAX_SUBTREE_DEPTH).collect()).unwrap();
        assert_eq!(deepest.components().len(), MAX_SUBTREE_DEPTH);
        let text: String = (0..=MAX_SUBTREE_DEPTH).map(|i| format!("/c{i}")).collect();
        assert_eq!(SubtreePath::parse(&text), Err(PathError::TooDeep));
    }
}
