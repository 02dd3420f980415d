//! The one contract every step machine of the core speaks with its executor — the lease's
//! acquisition, publication, one-shot publication and release, and the project lock's attempt,
//! clear and release.
//!
//! A [`Machine`] never performs an effect. It names the next one ([`Machine::poll`]), an
//! executor carries it out and hands back its [`Answer`] ([`Machine::handle`]), and once it
//! names none its result is taken ([`Machine::output`]). [`run`] and [`drive`] are the one loop
//! every executor runs.
//!
//! - **Typed asks.** Every effect carries an [`Ask`] whose type says what answers it: an
//!   executor answers with `ask.answer(value)` (or `reply.fail(error)`), so an answer of the
//!   wrong type does not compile, and no executor can build an answer any other way.
//! - **Step identity.** Every effect a machine polls is stamped with the serial of the step
//!   that asks it ([`Serial`]), and the machine takes an answer only if it carries that serial:
//!   an answer kept from an earlier poll is refused ([`ProtocolError::KeptAnswer`]) even when it
//!   answers an effect of the same name.
//! - **Refusal, never a panic.** An answer the machine did not ask for leaves it unchanged and
//!   is reported as a [`ProtocolError`] — always a bug in this library's executors.
//! - **Effects declared once.** A [`Protocol`] names its effect type and the input its machines
//!   read; each family of effects is one list given to `effects!`, which makes the enum, its
//!   constructors, names and failures from it.

/// An executor bug, reported instead of a panic: nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// An answer was handed to a machine that did not ask for it (an answer kept from an
    /// earlier effect); the machine is unchanged.
    #[error("executor bug: the {machine} machine was handed an answer to `{answered}` it did not ask for; nothing changed")]
    WrongAnswer {
        /// The machine (and its stage).
        machine: &'static str,
        /// The effect the answer was made for (for the project lock's machines: the kind of
        /// result).
        answered: &'static str,
    },
    /// An answer made for an earlier step of the machine (kept from an earlier poll) was
    /// handed to a later one, even if both asked an effect of the same name; the machine is
    /// unchanged.
    #[error("executor bug: the {machine} machine was handed an answer to `{answered}` made for its step {asked}, while it is at step {current}; nothing changed")]
    KeptAnswer {
        /// The machine.
        machine: &'static str,
        /// The effect the answer was made for.
        answered: &'static str,
        /// The serial of the step that asked it.
        asked: u64,
        /// The serial of the machine's current step.
        current: u64,
    },
    /// A machine's result was asked before it ended.
    #[error("executor bug: the {machine} machine's result was asked before it ended")]
    Unfinished {
        /// The machine.
        machine: &'static str,
    },
    /// A machine ended in a way the run that drove it cannot end (an attempt to acquire the
    /// project lock that ended `cleared`, a clear that ended `acquired`): nothing more was done.
    #[error(
        "bug: the {machine} machine ended `{end}`, which its run cannot; nothing more was done"
    )]
    ImpossibleEnd {
        /// The machine.
        machine: &'static str,
        /// How it ended.
        end: &'static str,
    },
}

impl ProtocolError {
    /// An answer to `answered` handed to `machine`, which did not ask for it.
    pub(crate) fn wrong(machine: &'static str, answered: &'static str) -> Self {
        ProtocolError::WrongAnswer { machine, answered }
    }
}

/// The language a family of machines speaks with its executor: the effects they name and the
/// input they read from an [`Answer`].
pub trait Protocol {
    /// The effects, borrowing what they carry (a plan, a document) from the machine for `'m`.
    type Effect<'m>: Stamped;
    /// The answers as the machines read them (made only by an [`Ask`]).
    type Input;
}

/// An effect: it carries the [`Ask`] of the step that named it, which a [`Serial`] stamps.
pub trait Stamped {
    /// The effect, asked by the step of serial `step` (only that step takes its answer).
    #[doc(hidden)]
    fn stamped(self, step: u64) -> Self;
}

/// The effects of a protocol `P`, borrowing from the machine for `'m`.
pub type EffectOf<'m, P> = <P as Protocol>::Effect<'m>;

/// The answer to an effect of a protocol `P`.
pub type AnswerOf<P> = Answer<<P as Protocol>::Input>;

/// A step machine: poll the next effect, execute it, hand back its answer.
pub trait Machine {
    /// The protocol it speaks.
    type Protocol: Protocol;
    /// What the machine ends with.
    type Output;
    /// The next effect; `None` once the machine has ended.
    fn poll(&self) -> Option<EffectOf<'_, Self::Protocol>>;
    /// Consumes the answer to the effect last polled. An answer to another effect, or to an
    /// earlier step (an executor bug), is refused, and the machine is unchanged.
    fn handle(&mut self, answer: AnswerOf<Self::Protocol>) -> Result<(), ProtocolError>;
    /// The result, once [`Machine::poll`] names no effect ([`ProtocolError::Unfinished`]
    /// before).
    fn output(self) -> Result<Self::Output, ProtocolError>;
}

/// Runs `machine` until it has ended, executing each effect with `execute` — or until
/// `execute` answers `None` (the executor stopped: a crash in a model). Returns whether the
/// machine ended. The whole executor of a machine is this loop plus one `match` on its effect.
pub fn drive<M: Machine>(
    machine: &mut M,
    mut execute: impl FnMut(EffectOf<'_, M::Protocol>) -> Option<AnswerOf<M::Protocol>>,
) -> Result<bool, ProtocolError> {
    loop {
        // A statement of its own, so the polled effect's borrow of the machine ends here.
        let Some(effect) = machine.poll() else {
            return Ok(true);
        };
        match execute(effect) {
            Some(answer) => machine.handle(answer)?,
            None => return Ok(false),
        }
    }
}

/// Runs `machine` to its end and returns its result.
pub fn run<M: Machine>(
    mut machine: M,
    mut execute: impl FnMut(EffectOf<'_, M::Protocol>) -> AnswerOf<M::Protocol>,
) -> Result<M::Output, ProtocolError> {
    drive(&mut machine, |effect| Some(execute(effect)))?;
    machine.output()
}

/// What a machine asked, answered by a `T` and read by the machine as an `I`. Only a machine
/// makes one; an executor turns it into the machine's [`Answer`] with [`Ask::answer`], so the
/// answer's type is the question's.
pub struct Ask<T, I> {
    effect: &'static str,
    /// The serial of the step that asked ([`Serial`]): its answer is taken by that step only.
    step: u64,
    wrap: fn(T) -> I,
}

/// An [`Ask`] answered by the effect's value or the executor's error `E`.
pub type Reply<T, E, I> = Ask<Result<T, E>, I>;

impl<T, I> Ask<T, I> {
    pub(crate) fn new(effect: &'static str, wrap: fn(T) -> I) -> Self {
        Ask {
            effect,
            step: 0,
            wrap,
        }
    }

    /// The answer `value`, for the machine that asked (and the step of it that asked).
    pub fn answer(self, value: T) -> Answer<I> {
        Answer {
            effect: self.effect,
            step: self.step,
            input: (self.wrap)(value),
        }
    }

    /// The kebab-case name of the effect it asks.
    pub fn name(&self) -> &'static str {
        self.effect
    }

    /// The same ask, made by the step of serial `step`.
    pub(crate) fn stamped(mut self, step: u64) -> Self {
        self.step = step;
        self
    }

    /// An answer of the machine's own input, bypassing the ask's type: for the core's tests,
    /// which hand machines answers of every kind (wrong ones included).
    #[cfg(test)]
    pub(crate) fn answer_input(self, input: I) -> Answer<I> {
        Answer {
            effect: self.effect,
            step: self.step,
            input,
        }
    }
}

impl<T, E, I> Reply<T, E, I> {
    /// The effect failed with `error`.
    pub fn fail(self, error: E) -> Answer<I> {
        self.answer(Err(error))
    }
}

impl<T, I> std::fmt::Debug for Ask<T, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ask({} #{})", self.effect, self.step)
    }
}

/// Two asks are alike when they ask the same effect (for the core's tests, which compare the
/// effects a machine names with the ones a script expects).
#[cfg(test)]
impl<T, I> PartialEq for Ask<T, I> {
    fn eq(&self, other: &Self) -> bool {
        self.effect == other.effect
    }
}

/// The answer to one effect, made by its [`Ask`].
#[derive(Debug)]
pub struct Answer<I> {
    effect: &'static str,
    step: u64,
    input: I,
}

impl<I> Answer<I> {
    /// The name of the effect it answers.
    pub fn effect(&self) -> &'static str {
        self.effect
    }

    /// The input it carries, as the machines read it.
    pub(crate) fn input(&self) -> &I {
        &self.input
    }

    /// The same answer (to the same step) with its input replaced by `f` of it.
    pub(crate) fn map_input(self, f: impl FnOnce(I) -> I) -> Answer<I> {
        Answer {
            effect: self.effect,
            step: self.step,
            input: f(self.input),
        }
    }

    /// The answer, taken apart (the name is kept for a [`ProtocolError`]).
    pub(crate) fn into_parts(self) -> (&'static str, I) {
        (self.effect, self.input)
    }
}

/// Declares one family of effects, each answered by a [`Reply`], once: the enum (each variant
/// its payload, then its reply), a constructor per effect (its ask unstamped), its name, its
/// stamp and its failure.
///
/// ```text
/// effects! {
///     /// doc
///     pub enum Family<'m, E> reads Input {
///         /// doc
///         Variant(arg: Payload, ...) -> Answered = "kebab-name", wrap, constructor;
///     }
/// }
/// ```
/// `wrap` turns the answered value into the `Input`; a failure becomes `Input::Failed`.
macro_rules! effects {
    (
        $(#[$meta:meta])*
        pub enum $Family:ident<$($lt:lifetime,)? E> reads $Input:ident {
            $(
                $(#[$vmeta:meta])*
                $Variant:ident($($arg:ident: $Payload:ty),*) -> $T:ty
                    = $label:literal, $wrap:expr, $ctor:ident;
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub enum $Family<$($lt,)? E> {
            $(
                $(#[$vmeta])*
                $Variant($($Payload,)* $crate::contract::Reply<$T, E, $Input<E>>),
            )*
        }

        impl<$($lt,)? E> $Family<$($lt,)? E> {
            $(
                #[allow(dead_code)]
                pub(crate) fn $ctor($($arg: $Payload),*) -> Self {
                    $Family::$Variant(
                        $($arg,)*
                        $crate::contract::Ask::new($label, |result| match result {
                            Ok(value) => ($wrap)(value),
                            Err(error) => $Input::Failed(error),
                        }),
                    )
                }
            )*

            /// The kebab-case name of the effect (for probes and reports).
            pub fn name(&self) -> &'static str {
                match self {
                    $($Family::$Variant(.., ask) => ask.name(),)*
                }
            }

            /// The effect failed with `error` (for an executor that stops before carrying
            /// it out: a crash in a model, a scripted failure).
            pub fn fail(self, error: E) -> $crate::contract::Answer<$Input<E>> {
                match self {
                    $($Family::$Variant(.., ask) => ask.fail(error),)*
                }
            }

            /// An answer of the machine's own input, bypassing the ask's type (the core's
            /// tests).
            #[cfg(test)]
            #[allow(dead_code)]
            pub(crate) fn answer_input(self, input: $Input<E>) -> $crate::contract::Answer<$Input<E>> {
                match self {
                    $($Family::$Variant(.., ask) => ask.answer_input(input),)*
                }
            }
        }

        impl<$($lt,)? E> $crate::contract::Stamped for $Family<$($lt,)? E> {
            fn stamped(self, step: u64) -> Self {
                match self {
                    $($Family::$Variant($($arg,)* ask) => $Family::$Variant($($arg,)* ask.stamped(step)),)*
                }
            }
        }
    };
}
pub(crate) use effects;

/// The serial number of a machine run's steps. Every effect a machine polls is stamped with
/// the serial of the step that asks it, and the machine takes an answer only if it carries
/// that serial: an answer kept from an earlier poll is refused ([`ProtocolError::KeptAnswer`])
/// even when it answers an effect of the same name (a `read-clock` of the acquisition's
/// prelude handed to the grant's `read-clock`). The serial moves on with every answer taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Serial(u64);

impl Serial {
    /// A serial whose first step is `n` (a part of a machine that counts in a range of its
    /// own).
    pub(crate) fn starting_at(n: u64) -> Self {
        Serial(n)
    }

    /// `effect`, stamped with this step's serial.
    pub(crate) fn stamp<S: Stamped>(self, effect: Option<S>) -> Option<S> {
        effect.map(|effect| effect.stamped(self.0))
    }

    /// The serial of the next step.
    pub(crate) fn advanced(&mut self) {
        self.0 += 1;
    }

    /// `handle` of the step this serial names, then the serial of the next step (unchanged
    /// when the answer was refused: the machine is unchanged too).
    pub(crate) fn take<I>(
        &mut self,
        machine: &'static str,
        answer: Answer<I>,
        handle: impl FnOnce(Answer<I>) -> Result<(), ProtocolError>,
    ) -> Result<(), ProtocolError> {
        if answer.step != self.0 {
            return Err(ProtocolError::KeptAnswer {
                machine,
                answered: answer.effect,
                asked: answer.step,
                current: self.0,
            });
        }
        handle(answer)?;
        self.advanced();
        Ok(())
    }
}
