//! The per-VM state machine: from the desired `state` and what the VM is doing now, the operations to
//! send (none when the VM is already there) and the power state expected afterwards.

use std::time::Duration;

use crate::model::{Op, Power, State};

/// Settings that shape the decision.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Graceful shutdown / reboot timeout given to the guest.
    pub timeout: Duration,
    /// Hard-stop when the graceful way is impossible or timed out.
    pub force: bool,
    /// `state: status` only: bring owned VMs that are not running back up.
    pub remediate: bool,
}

/// What to do with one VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Already there; nothing is sent.
    Keep,
    /// Send these operations in order; the VM should then be in `expect`.
    Act { ops: Vec<Op>, expect: Power },
    /// The request cannot be met for this VM; the text says why and what to do.
    Refuse(String),
}

/// Decide for one VM. `owned` matters only to remediation, which never touches a VM without the
/// ownership tag.
pub fn decide(state: State, now: Power, owned: bool, rules: Rules) -> Decision {
    use Decision::*;
    use Power::*;
    let act = |ops: Vec<Op>, expect: Power| Act { ops, expect };
    let shutdown = Op::Shutdown {
        timeout: rules.timeout,
        force_stop: rules.force,
    };
    if now == Unknown {
        return Refuse("its power state is unknown (is its node online?)".into());
    }
    match (state, now) {
        (State::Status, _) if !rules.remediate => Keep,
        (State::Status, Running) => Keep,
        (State::Status, _) if !owned => Keep,
        (State::Status, Stopped) => act(vec![Op::Start], Running),
        (State::Status, Paused) => act(vec![Op::Resume], Running),

        (State::Started, Running) => Keep,
        (State::Started, Stopped) => act(vec![Op::Start], Running),
        // `start` on a paused VM fails with "already running": resuming is what starts it.
        (State::Started, Paused) => act(vec![Op::Resume], Running),

        (State::Stopped, Stopped) => Keep,
        (State::Stopped, Running) => act(vec![shutdown], Stopped),
        // A paused guest cannot react to ACPI; Proxmox refuses "VM is paused - cannot shutdown".
        (State::Stopped, Paused) if rules.force => act(vec![Op::Stop], Stopped),
        (State::Stopped, Paused) => Refuse(
            "it is paused, so it cannot shut down gracefully; resume it first or set force: true to \
             stop it hard"
                .into(),
        ),

        // A restart always acts (like a service restart); a stopped VM is simply started.
        (State::Restarted, Stopped) => act(vec![Op::Start], Running),
        (State::Restarted, Running) if rules.force => act(vec![shutdown, Op::Start], Running),
        (State::Restarted, Running) => act(
            vec![Op::Reboot {
                timeout: rules.timeout,
            }],
            Running,
        ),
        (State::Restarted, Paused) if rules.force => act(vec![Op::Stop, Op::Start], Running),
        (State::Restarted, Paused) => act(
            vec![
                Op::Resume,
                Op::Reboot {
                    timeout: rules.timeout,
                },
            ],
            Running,
        ),

        (State::Reset, Running) => act(vec![Op::Reset], Running),
        // Reset of a stopped VM has nothing to reset: booting it gives the same fresh start.
        (State::Reset, Stopped) => act(vec![Op::Start], Running),
        (State::Reset, Paused) => act(vec![Op::Resume, Op::Reset], Running),

        (State::Paused, Paused) => Keep,
        (State::Paused, Running) => act(vec![Op::Suspend], Paused),
        (State::Paused, Stopped) => Refuse(
            "it is stopped, and only a running VM can be paused; start it first (state: started)"
                .into(),
        ),

        (State::Resumed, Running) => Keep,
        (State::Resumed, Paused) => act(vec![Op::Resume], Running),
        (State::Resumed, Stopped) => Refuse(
            "it is stopped, not paused, so there is nothing to resume; use state: started to boot it"
                .into(),
        ),
        (_, Unknown) => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Power::*;

    const T: Duration = Duration::from_secs(30);

    fn rules(force: bool, remediate: bool) -> Rules {
        Rules {
            timeout: T,
            force,
            remediate,
        }
    }

    fn ops(state: State, now: Power, force: bool) -> Decision {
        decide(state, now, true, rules(force, false))
    }

    #[test]
    fn started() {
        assert_eq!(ops(State::Started, Running, false), Decision::Keep);
        assert_eq!(
            ops(State::Started, Stopped, false),
            Decision::Act {
                ops: vec![Op::Start],
                expect: Running
            }
        );
        assert_eq!(
            ops(State::Started, Paused, false),
            Decision::Act {
                ops: vec![Op::Resume],
                expect: Running
            }
        );
    }

    #[test]
    fn stopped_is_graceful_unless_forced() {
        assert_eq!(ops(State::Stopped, Stopped, true), Decision::Keep);
        assert_eq!(
            ops(State::Stopped, Running, false),
            Decision::Act {
                ops: vec![Op::Shutdown {
                    timeout: T,
                    force_stop: false
                }],
                expect: Stopped
            }
        );
        assert_eq!(
            ops(State::Stopped, Running, true),
            Decision::Act {
                ops: vec![Op::Shutdown {
                    timeout: T,
                    force_stop: true
                }],
                expect: Stopped
            }
        );
        match ops(State::Stopped, Paused, false) {
            Decision::Refuse(m) => assert!(m.contains("force: true"), "{m}"),
            d => panic!("{d:?}"),
        }
        assert_eq!(
            ops(State::Stopped, Paused, true),
            Decision::Act {
                ops: vec![Op::Stop],
                expect: Stopped
            }
        );
    }

    #[test]
    fn restarted_always_acts_and_starts_stopped_vms() {
        assert_eq!(
            ops(State::Restarted, Stopped, false),
            Decision::Act {
                ops: vec![Op::Start],
                expect: Running
            }
        );
        assert_eq!(
            ops(State::Restarted, Running, false),
            Decision::Act {
                ops: vec![Op::Reboot { timeout: T }],
                expect: Running
            }
        );
        assert_eq!(
            ops(State::Restarted, Running, true),
            Decision::Act {
                ops: vec![
                    Op::Shutdown {
                        timeout: T,
                        force_stop: true
                    },
                    Op::Start
                ],
                expect: Running
            }
        );
        assert_eq!(
            ops(State::Restarted, Paused, true),
            Decision::Act {
                ops: vec![Op::Stop, Op::Start],
                expect: Running
            }
        );
        assert_eq!(
            ops(State::Restarted, Paused, false),
            Decision::Act {
                ops: vec![Op::Resume, Op::Reboot { timeout: T }],
                expect: Running
            }
        );
    }

    #[test]
    fn reset_pause_resume() {
        assert_eq!(
            ops(State::Reset, Running, false),
            Decision::Act {
                ops: vec![Op::Reset],
                expect: Running
            }
        );
        assert_eq!(
            ops(State::Reset, Stopped, false),
            Decision::Act {
                ops: vec![Op::Start],
                expect: Running
            }
        );
        assert_eq!(
            ops(State::Paused, Running, false),
            Decision::Act {
                ops: vec![Op::Suspend],
                expect: Paused
            }
        );
        assert_eq!(ops(State::Paused, Paused, false), Decision::Keep);
        assert!(matches!(
            ops(State::Paused, Stopped, false),
            Decision::Refuse(_)
        ));
        assert_eq!(ops(State::Resumed, Running, false), Decision::Keep);
        assert_eq!(
            ops(State::Resumed, Paused, false),
            Decision::Act {
                ops: vec![Op::Resume],
                expect: Running
            }
        );
        assert!(matches!(
            ops(State::Resumed, Stopped, false),
            Decision::Refuse(_)
        ));
    }

    #[test]
    fn status_is_read_only_unless_remediating_owned_vms() {
        for p in [Running, Paused, Stopped] {
            assert_eq!(
                decide(State::Status, p, true, rules(false, false)),
                Decision::Keep
            );
            assert_eq!(
                decide(State::Status, p, false, rules(false, true)),
                Decision::Keep
            );
        }
        assert_eq!(
            decide(State::Status, Stopped, true, rules(false, true)),
            Decision::Act {
                ops: vec![Op::Start],
                expect: Running
            }
        );
        assert_eq!(
            decide(State::Status, Paused, true, rules(false, true)),
            Decision::Act {
                ops: vec![Op::Resume],
                expect: Running
            }
        );
        assert_eq!(
            decide(State::Status, Running, true, rules(false, true)),
            Decision::Keep
        );
    }

    #[test]
    fn unknown_power_is_refused_for_every_state() {
        for s in [
            State::Started,
            State::Stopped,
            State::Restarted,
            State::Reset,
            State::Paused,
            State::Resumed,
            State::Status,
        ] {
            assert!(matches!(
                decide(s, Unknown, true, rules(true, true)),
                Decision::Refuse(_)
            ));
        }
    }
}
