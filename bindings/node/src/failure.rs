//! The addon's errors as the host sees them: every error code of the package, named once here
//! with the [`ErrorKind`] of its failures ([`Code`], listed to JS by `errorCodes()`), a
//! [`Failure`] carrying one of them, and an
//! [`JsAnswer`], what every entry point returns: its value as a JS value, or its failure thrown
//! as a JS `Error` whose `code` is the failure's code and whose other own properties are the
//! failure's fields (a fencing `reason`, a lock's `owner`, ...). No JSON text crosses the
//! boundary in either direction of an answer.

use napi::bindgen_prelude::{Function, FunctionRef, JsObjectValue, Object, ToNapiValue, Unknown};
use napi::{sys, Env, JsValue, Status};
use napi_derive::napi;
use serde_json::Value;
use solewriter_core::error_kind::{Classified, ErrorKind};
use solewriter_core::projection::columns::CorruptRow;
use solewriter_core::projection::machine::ProtocolError;

/// Declares [`Code`], its JS names and its kinds from one list.
macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $kind:ident,)*) => {
        /// Every `code` an error of the package carries (`docs/node.md` says what each means).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Code {
            $($(#[$doc])* $variant,)*
        }

        impl Code {
            /// Every code, in the manual's order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The code as JS sees it (upper snake case).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $name,)*
                }
            }

            /// Who must act on a failure of this code: the kind every failure made with it
            /// ([`Failure::new`]) has. A failure that wraps an outcome of the core, or an error
            /// of the files' products (a file effect's, the project lock's, the ledger's),
            /// takes its kind from it instead ([`Failure::of_kind`]); for the core's lease
            /// outcomes the tests hold that kind to this one, but for `RELEASE_FAILED`, of its
            /// cause's kind.
            pub fn kind(self) -> ErrorKind {
                match self {
                    $(Code::$variant => ErrorKind::$kind,)*
                }
            }
        }
    };
}

codes! {
    // The lease, the store and the files (each code's kind after `=>`).
    /// The configuration is wrong (the message names the field).
    InvalidConfig = "INVALID_CONFIG" => Input,
    /// An argument is wrong.
    InvalidInput = "INVALID_INPUT" => Input,
    /// A `Grant` object already used by a publication or a release (thrown by the JS layer).
    GrantSpent = "GRANT_SPENT" => Input,
    /// The target is not admitted.
    NotAdmitted = "NOT_ADMITTED" => Input,
    /// A submission was refused (`rejection` names why).
    Rejected = "REJECTED" => Input,
    /// A document could not be composed or read.
    Document = "DOCUMENT" => Environment,
    /// A lock or the store was busy.
    Busy = "BUSY" => Contention,
    /// The host's connection is inside a transaction of its own.
    InTransaction = "IN_TRANSACTION" => Contention,
    /// The grant no longer holds the lease (`reason`).
    Fenced = "FENCED" => LostAuthority,
    /// The lease expired before the rename.
    LeaseExpired = "LEASE_EXPIRED" => LostAuthority,
    /// The fencing epoch cannot be raised further.
    EpochExhausted = "EPOCH_EXHAUSTED" => Environment,
    /// A held project lock is no longer this holder's.
    LockLost = "LOCK_LOST" => LostAuthority,
    /// The tables are not this build's.
    ForeignSchema = "FOREIGN_SCHEMA" => Environment,
    /// The Memory Core's tables were not adopted.
    AdoptionRefused = "ADOPTION_REFUSED" => Environment,
    /// A stored row breaks solewriter's invariants.
    CorruptRow = "CORRUPT_ROW" => Environment,
    /// A lease row is inconsistent.
    InconsistentLease = "INCONSISTENT_LEASE" => Environment,
    /// The document in place carries an epoch no grant of this store can have produced.
    ForeignEpoch = "FOREIGN_EPOCH" => Environment,
    /// Any other SQLite error (`sqliteCode`), raised by the JS layer.
    Sqlite = "SQLITE" => Environment,
    /// A callback of the host failed.
    Host = "HOST" => Environment,
    /// A file-system step failed.
    Io = "IO" => Environment,
    /// The runtime directory is not a plain directory.
    UnsafeRuntimeDir = "UNSAFE_RUNTIME_DIR" => Environment,
    /// A FIFO, device or socket is where a document is read.
    NotRegularFile = "NOT_REGULAR_FILE" => Environment,
    /// Nothing was published for the target yet.
    NotPublished = "NOT_PUBLISHED" => Environment,
    /// Reading a published document failed.
    Read = "READ" => Environment,
    /// The OS random source failed.
    Random = "RANDOM" => Environment,
    /// No addon could be loaded (thrown by the JS loader, before this addon exists).
    AddonMissing = "ADDON_MISSING" => Environment,
    /// `current.json` was replaced, its directory fsync failed.
    NotDurable = "NOT_DURABLE" => PartialSuccess,
    /// `current.json` was replaced, the release did not commit.
    PublishedNotReleased = "PUBLISHED_NOT_RELEASED" => PartialSuccess,
    /// The work failed and its release did not commit either.
    ReleaseFailed = "RELEASE_FAILED" => PartialSuccess,
    // The project lock.
    /// The file system refuses kernel locks.
    KernelLockUnavailable = "KERNEL_LOCK_UNAVAILABLE" => Environment,
    /// A clear was refused (`refused` names why).
    ClearRefused = "CLEAR_REFUSED" => Input,
    /// The project directory does not exist.
    NoDirectory = "NO_DIRECTORY" => Environment,
    /// The lock's owner cannot be judged from here.
    UnknownOwner = "UNKNOWN_OWNER" => Environment,
    /// The lock record cannot be read as one.
    MalformedLock = "MALFORMED_LOCK" => Environment,
    /// A dead owner's recovery was abandoned.
    RecoveryAbandoned = "RECOVERY_ABANDONED" => Environment,
    /// This process's own identity could not be read.
    OwnIdentity = "OWN_IDENTITY" => Environment,
    /// The lock directory is unsafe.
    UnsafeLockDir = "UNSAFE_LOCK_DIR" => Environment,
    /// A project lock error of a kind this build has no name for.
    Lock = "LOCK" => Environment,
    // The write guard.
    /// A bridge frame or agent envelope is malformed.
    MalformedFrame = "MALFORMED_FRAME" => Input,
    /// The guard's authority cannot be reached.
    AuthorityUnavailable = "AUTHORITY_UNAVAILABLE" => Input,
    // The ledger.
    /// The fact source (`git`) failed.
    Source = "SOURCE" => Environment,
    /// The interpretation moved during a build.
    InterpretationMoved = "INTERPRETATION_MOVED" => Contention,
    /// Two facts conflict.
    FactConflict = "FACT_CONFLICT" => Environment,
    /// The snapshot is too large.
    SnapshotTooLarge = "SNAPSHOT_TOO_LARGE" => Environment,
    /// The consumer of a build failed.
    Consumer = "CONSUMER" => Input,
    /// A ledger error of a kind this build has no name for.
    Ledger = "LEDGER" => Environment,
    // A bug of solewriter's.
    /// A bug of solewriter's, caught at the native boundary instead of aborting the host.
    Internal = "INTERNAL" => Environment,
}

/// Every error code of the package, in the manual's order: the one list the JS layer and the
/// tests read (`lib/answer.js`, `test/surface.test.js`).
#[napi]
pub fn error_codes() -> Vec<&'static str> {
    Code::ALL.iter().map(|c| c.as_str()).collect()
}

/// The JS layer's mark of the package's own errors, handed over once ([`mark_own_errors`]) and
/// kept as the addon's instance data: a function every error the addon makes is handed to.
type Mark = FunctionRef<Handle, Unknown<'static>>;

/// A JS value handed on as it is: the error being marked.
pub struct Handle(sys::napi_value);

impl ToNapiValue for Handle {
    unsafe fn to_napi_value(_: sys::napi_env, handle: Self) -> napi::Result<sys::napi_value> {
        Ok(handle.0)
    }
}

/// Takes the JS layer's mark of the package's own errors (`lib/addon.js`), once per load: a
/// function that registers an error as the package's where no other code can (a module-private
/// `WeakSet`; a mark on the error itself could be copied onto a host's error). Every error the
/// addon makes afterwards is handed to it. A second call is refused.
#[napi]
pub fn mark_own_errors(env: Env, mark: Function<Handle, Unknown<'static>>) -> napi::Result<()> {
    if env.get_instance_data::<Mark>()?.is_some() {
        return Err(napi::Error::new(
            Status::GenericFailure,
            "the mark of the package's own errors is already set",
        ));
    }
    env.set_instance_data(mark.create_ref()?, (), |_| {})
}

/// Why an effect or a call failed.
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    pub(crate) code: Code,
    /// Who must act on it (not seen by JS): its code's, or the kind of the outcome or error
    /// it wraps.
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
    /// More fields for the JS error (a fencing reason), or null.
    pub(crate) detail: Value,
}

impl Failure {
    pub(crate) fn new(code: Code, message: impl std::fmt::Display) -> Self {
        Failure {
            code,
            kind: code.kind(),
            message: message.to_string(),
            detail: Value::Null,
        }
    }

    /// This failure of `kind`: the kind of the core's outcome, or of the error of the files'
    /// products, it wraps.
    pub(crate) fn of_kind(self, kind: ErrorKind) -> Self {
        Failure { kind, ..self }
    }

    /// This failure with the fields of `detail` (an object) added to its JS error.
    pub(crate) fn with(self, detail: Value) -> Self {
        Failure { detail, ..self }
    }

    /// This failure as a JS `Error` (`code`, `message` and the detail's fields), to be thrown
    /// by napi-rs as it is: an error made from a JS error object is rethrown verbatim.
    pub(crate) fn into_js(self, env: &Env) -> napi::Error {
        match self.error_object(env) {
            Ok(error) => napi::Error::from(error.to_unknown()),
            // The environment could not make an object (it is tearing down): the code is kept
            // in the message.
            Err(_) => napi::Error::new(
                Status::GenericFailure,
                format!("{}: {}", self.code.as_str(), self.message),
            ),
        }
    }

    /// This failure as the fields of its JS error (`code`, `message` and the detail's fields),
    /// for an answer that carries it as a value (a batch's, for one of its targets): the JS
    /// layer makes the coded error of it (`lib/answer.js`).
    pub(crate) fn into_fields(self) -> Value {
        let mut fields = match self.detail {
            Value::Object(fields) => fields,
            _ => serde_json::Map::new(),
        };
        fields.insert("code".into(), Value::from(self.code.as_str()));
        fields.insert("message".into(), Value::from(self.message));
        Value::Object(fields)
    }

    fn error_object<'e>(&self, env: &'e Env) -> napi::Result<Object<'e>> {
        let mut error =
            env.create_error(napi::Error::new(Status::GenericFailure, &self.message))?;
        error.set("code", self.code.as_str())?;
        if let Value::Object(fields) = &self.detail {
            for (name, value) in fields {
                error.set(name, value)?;
            }
        }
        // Marked as the package's own (`lib/answer.js`), so that a host's error that happens to
        // carry one of these codes is still the host's. Without a mark (the addon loaded by
        // other code than the package's), the error is coded all the same.
        if let Some(mark) = env.get_instance_data::<Mark>()? {
            mark.borrow_back(env)?.call(Handle(error.raw()))?;
        }
        Ok(error)
    }
}

/// The addon's error is what a core outcome carries when one of its effects failed: the
/// outcome takes its kind from here.
impl Classified for Failure {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

/// An executor bug the machine refused (`INTERNAL`).
impl From<ProtocolError> for Failure {
    fn from(bug: ProtocolError) -> Self {
        Failure::new(Code::Internal, bug)
    }
}

impl From<solewriter_files::FileError> for Failure {
    fn from(e: solewriter_files::FileError) -> Self {
        use solewriter_files::FileError as F;
        let code = match &e {
            F::Busy { .. } => Code::Busy,
            F::Io { .. } => Code::Io,
            F::UnsafeRuntimeDir { .. } => Code::UnsafeRuntimeDir,
            F::NotRegularFile { .. } => Code::NotRegularFile,
            F::NotDurable { .. } => Code::NotDurable,
            F::Document(_) => Code::Document,
            F::NotPublished { .. } => Code::NotPublished,
            F::Read { .. } => Code::Read,
        };
        let kind = e.kind();
        Failure::new(code, e).of_kind(kind)
    }
}

impl From<CorruptRow> for Failure {
    fn from(e: CorruptRow) -> Self {
        Failure::new(Code::CorruptRow, format!("store holds a corrupt row ({e})"))
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A wrong argument: `INVALID_INPUT`.
pub(crate) fn invalid(what: impl std::fmt::Display) -> Failure {
    Failure::new(Code::InvalidInput, what)
}

/// What an entry point's body gives: its value, or its failure.
pub(crate) type Outcome = Result<Value, Failure>;

/// What an entry point returns: its value as a JS value, or its failure thrown as a coded JS
/// `Error` ([`Failure::into_js`]).
pub struct JsAnswer(pub(crate) Outcome);

impl ToNapiValue for JsAnswer {
    unsafe fn to_napi_value(env: sys::napi_env, answer: Self) -> napi::Result<sys::napi_value> {
        let env = Env::from_raw(env);
        match answer.0 {
            Ok(value) => json_value(&env, &value),
            Err(failure) => Err(failure.into_js(&env)),
        }
    }
}

/// `value` as the JS value `JSON.parse` makes of its text. Not napi-rs's own conversion of a
/// `serde_json::Value`, which differs where an answer carries text of others (an agent's
/// frame, a producer's envelope): it assigns each key, so a `"__proto__"` key would set the
/// object's prototype instead of being an own property; it turns an integer beyond 2^53 into
/// a `BigInt`, which `JSON.stringify` then refuses; and it refuses answers of more than a
/// million values.
fn json_value(env: &Env, value: &Value) -> napi::Result<sys::napi_value> {
    let json: Object = env.get_global()?.get_named_property_unchecked("JSON")?;
    let parse: Function<String, Unknown> = json.get_named_property_unchecked("parse")?;
    Ok(parse.call(value.to_string())?.raw())
}

impl napi::bindgen_prelude::TypeName for JsAnswer {
    fn type_name() -> &'static str {
        "unknown"
    }

    fn value_type() -> napi::ValueType {
        napi::ValueType::Unknown
    }
}
