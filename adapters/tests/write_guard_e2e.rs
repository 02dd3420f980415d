//! End to end: two agents on two threads run multi-step edits on one shared in-memory
//! component tree, every write going frame → `parse_agent_envelope` → `admit_write` → mutate.
//!
//! Checked afterwards: a denied write never mutated (its payload is nowhere in the tree), and,
//! replaying the heap's event log, every write ran under a lock its writer held while no other
//! writer held an overlapping subtree — so no edit of one writer interleaved inside the other's
//! held subtree. The run ends with a disconnect sweep of a writer that abandons its edit.

use solewriter_adapters::subtree::write_guard::WriteGuard;
use solewriter_core::subtree::{
    admit_write, conflicts, derive_subtree_path, overlaps, parse_agent_envelope,
    parse_bridge_frame, Admitted, BridgeFrame, EnvelopeError, Lock, Parent, SubtreePath,
    WriteDenied, Writer,
};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::thread;

/// child → parent; `app` is the root.
const TREE: [(&str, Option<&str>); 9] = [
    ("app", None),
    ("panel", Some("app")),
    ("left", Some("panel")),
    ("left-1", Some("left")),
    ("left-2", Some("left")),
    ("right", Some("panel")),
    ("right-1", Some("right")),
    ("toolbar", Some("app")),
    ("tool-1", Some("toolbar")),
];

fn parent_of(id: &str) -> Parent<'static> {
    match TREE.iter().find(|(child, _)| *child == id) {
        None => Parent::Unknown,
        Some((_, None)) => Parent::Root,
        Some((_, Some(parent))) => Parent::Id(parent),
    }
}

fn path_of(id: &str) -> SubtreePath {
    derive_subtree_path(id, parent_of).unwrap()
}

/// The nodes of the subtree rooted at `id`, root first.
fn subtree(id: &str) -> Vec<&'static str> {
    let root = path_of(id);
    TREE.iter()
        .map(|(child, _)| *child)
        .filter(|child| root.contains(&path_of(child)))
        .collect()
}

#[derive(Debug)]
enum Event {
    Granted(Lock),
    Write(Writer, SubtreePath),
    Released(Lock),
}

/// Why the host refused a frame; nothing was mutated.
#[derive(Debug)]
enum Refused {
    Frame(EnvelopeError),
    Denied(WriteDenied),
}

#[derive(Default)]
struct HeapState {
    props: HashMap<String, Vec<String>>,
    log: Vec<Event>,
}

/// The shared heap: the component tree's properties, the per-heap guard, an event log.
#[derive(Default)]
struct Heap {
    guard: WriteGuard,
    state: Mutex<HeapState>,
}

impl Heap {
    /// The host path for one `set_instance_properties` frame.
    fn handle(&self, frame: &str) -> Result<Admitted, Refused> {
        let envelope = parse_agent_envelope(frame).map_err(Refused::Frame)?;
        let params = &envelope.message["params"];
        let id = params["id"].as_str().unwrap_or_default();
        let admitted = admit_write(envelope.context.as_ref(), id, parent_of, Some(&self.guard))
            .map_err(Refused::Denied)?;
        let payload = params["value"].as_str().unwrap_or_default().to_owned();
        let mut state = self.state.lock().unwrap();
        if let Admitted::Granted(lock) = &admitted {
            state.log.push(Event::Granted(lock.clone()));
        }
        if let Some(lock) = admitted.lock() {
            state
                .log
                .push(Event::Write(lock.writer.clone(), path_of(id)));
        }
        state.props.entry(id.to_owned()).or_default().push(payload);
        Ok(admitted)
    }

    fn release(&self, lock: &Lock) {
        self.state
            .lock()
            .unwrap()
            .log
            .push(Event::Released(lock.clone()));
        assert_eq!(self.guard.release(lock), Ok(true));
    }

    /// The disconnect path: log the sweep first, then free.
    fn disconnect(&self, frame: &str) -> Vec<Lock> {
        let Ok(BridgeFrame::Disconnected(writer)) = parse_bridge_frame(frame) else {
            panic!("not a disconnect frame: {frame}");
        };
        let held: Vec<Lock> = self
            .guard
            .snapshot()
            .unwrap()
            .into_iter()
            .filter(|lock| lock.writer == writer)
            .collect();
        let mut state = self.state.lock().unwrap();
        state.log.extend(held.iter().cloned().map(Event::Released));
        drop(state);
        let freed = self.guard.release_writer(&writer).unwrap();
        assert_eq!(freed, held);
        freed
    }
}

fn frame(agent: &str, id: &str, value: &str) -> String {
    format!(
        r#"{{"type":"agent_message","agentId":"{agent}","sessionId":"s-{agent}","message":{{"jsonrpc":"2.0","id":1,"method":"set_instance_properties","params":{{"id":"{id}","value":"{value}"}}}}}}"#
    )
}

const EDITS: usize = 300;
const ROOTS: [&str; 5] = ["panel", "left", "right", "toolbar", "app"];

/// Runs `EDITS` multi-step edits; returns the payloads of denied writes.
fn agent(heap: &Heap, name: &str, offset: usize) -> Vec<String> {
    let mut denied = Vec::new();
    for edit in 0..EDITS {
        let root = ROOTS[(edit + offset) % ROOTS.len()];
        let mut attempt = 0;
        let lock = loop {
            let value = format!("{name}:{edit}:0:{attempt}");
            match heap.handle(&frame(name, root, &value)) {
                Ok(Admitted::Granted(lock)) => break lock,
                Ok(other) => panic!("{name} expected a fresh grant, got {other:?}"),
                Err(Refused::Denied(WriteDenied::Conflict { .. })) => {
                    denied.push(value);
                    attempt += 1;
                    assert!(attempt < 1_000_000, "{name} starved on {root}");
                    thread::yield_now();
                }
                Err(Refused::Frame(error)) => panic!("{name}: frame refused: {error}"),
                Err(Refused::Denied(other)) => panic!("{name}: unexpected denial: {other}"),
            }
        };
        for (step, node) in subtree(root).into_iter().enumerate().skip(1) {
            thread::yield_now();
            let value = format!("{name}:{edit}:{step}:0");
            let admitted = heap.handle(&frame(name, node, &value)).unwrap();
            assert_eq!(admitted.reason(), "reentrant");
        }
        heap.release(&lock);
    }
    denied
}

#[test]
fn two_agents_never_interleave_inside_each_others_subtree() {
    let heap = Heap::default();
    let (denied_a, denied_b) = thread::scope(|scope| {
        let a = scope.spawn(|| agent(&heap, "alice", 0));
        let b = scope.spawn(|| agent(&heap, "bob", 2));
        (a.join().unwrap(), b.join().unwrap())
    });

    // Bob starts one more edit and drops off mid-way: the sweep frees his lock.
    heap.handle(&frame("bob", "toolbar", "bob:abandoned:0:0"))
        .unwrap();
    let freed =
        heap.disconnect(r#"{"type":"agent_disconnected","agentId":"bob","sessionId":"s-bob"}"#);
    assert_eq!(freed.len(), 1);
    assert_eq!(heap.guard.snapshot(), Ok(vec![]));
    assert_eq!(
        heap.handle(&frame("alice", "tool-1", "alice:after:0:0"))
            .unwrap()
            .reason(),
        "granted"
    );

    let state = heap.state.lock().unwrap();
    let denied: HashSet<&String> = denied_a.iter().chain(&denied_b).collect();
    assert!(!denied.is_empty(), "the agents never contended");
    let written: HashSet<&String> = state.props.values().flatten().collect();
    assert!(
        denied.is_disjoint(&written),
        "a denied write mutated the tree"
    );
    assert_eq!(
        written.len(),
        state.props.values().map(Vec::len).sum::<usize>()
    );

    let mut held: Vec<Lock> = Vec::new();
    let mut writes = 0;
    for event in &state.log {
        match event {
            Event::Granted(lock) => {
                assert!(
                    held.iter().all(|h| !conflicts(h, lock)),
                    "{lock} granted over {held:?}"
                );
                held.push(lock.clone());
            }
            Event::Released(lock) => held.retain(|h| h != lock),
            Event::Write(writer, node) => {
                writes += 1;
                assert!(
                    held.iter()
                        .any(|h| h.writer == *writer && h.path.contains(node)),
                    "{writer} wrote {node} without holding it"
                );
                assert!(
                    held.iter()
                        .all(|h| h.writer == *writer || !overlaps(&h.path, node)),
                    "{writer} wrote {node} inside another writer's held subtree"
                );
            }
        }
    }
    assert!(writes > 2 * EDITS);
    println!(
        "e2e: {writes} writes admitted, {} denied by conflict",
        denied.len()
    );
}
