//! The seccomp filter the interpreter runs under: a classic BPF program, built here
//! without the kernel, and pure, so that the host's tests run it on an interpreter of
//! their own. The supervisor installs it in its child just before that child `execve`s
//! the interpreter, which keeps it for its whole life (as does anything it starts).
//!
//! What it decides, in order:
//! - another architecture's calling convention is killed (numbers could be aliased);
//!   on x86-64, x32 numbers (bit 30) fail with `EPERM`;
//! - [`HARDENING`]: calls no program here needs and that are routes around the other
//!   layers (io_uring, userfaultfd, bpf, ptrace, another process's memory, keyrings,
//!   `pidfd_getfd`, `pidfd_send_signal`, `tkill`) fail with `EPERM`, whatever the policy;
//! - signals: `kill`, `tgkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo` and `pidfd_open`
//!   aimed at the supervisor (its pid, its process group), at the box's init (pid 1) or at
//!   every process (-1) fail with `EPERM`: the program cannot end its supervisor, and so
//!   cannot end a run early or make its end look like something else;
//! - the call channel: a `read` of one of the channel's fd numbers ([`CHANNEL`]) is
//!   handed to the supervisor (`SECCOMP_RET_USER_NOTIF`), which answers it only for the
//!   interpreter's main thread (see [`crate::supervise`]);
//! - with user notification, `exit_group` is handed to the supervisor, which lets it
//!   proceed at once: its argument is the status the process is ending with, known
//!   before the kernel has torn the process down (which takes milliseconds for Node);
//! - with the floor (a policy that denies starting processes): `execve` passes only
//!   when its path argument is the one address the supervisor's own `execve` of the
//!   interpreter names; any other `execve`, `execveat`, `fork`, `vfork`, and a `clone`
//!   without `CLONE_THREAD` (a process, not a thread) is handed to the supervisor, which
//!   refuses it with `EPERM` and reports it with its arguments; `clone3` fails with
//!   `ENOSYS` (libc then falls back to `clone`, whose flags a classic filter can read);
//! - everything else passes.

use crate::sys;

/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = 0x7fff_0000;
/// `SECCOMP_RET_USER_NOTIF`: the supervisor answers.
pub const RET_USER_NOTIF: u32 = 0x7fc0_0000;
/// `SECCOMP_RET_ERRNO`; the errno is in the low 16 bits.
pub const RET_ERRNO: u32 = 0x0005_0000;
/// `SECCOMP_RET_KILL_PROCESS`.
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
/// `EPERM`.
pub const EPERM: u32 = 1;
/// `ENOSYS`.
pub const ENOSYS: u32 = 38;
/// `CLONE_THREAD`, in `clone`'s first argument.
pub const CLONE_THREAD: u32 = 0x0001_0000;

/// The fd numbers of the call channel: `read(CHANNEL.start + s, …)` says "the call is
/// done with status `s`, give me the next one" (`s` < 256); `read(READY, …)` says "ready
/// for the first program". No real fd is ever this high.
pub const CHANNEL: std::ops::Range<u32> = 0x7fff_0000..0x7fff_0101;
/// See [`CHANNEL`].
pub const READY: u32 = CHANNEL.start + 256;

/// `BPF_LD | BPF_W | BPF_ABS`: load a word of `seccomp_data`.
pub const LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
pub const JEQ_K: u16 = 0x15;
/// `BPF_JMP | BPF_JGT | BPF_K`.
pub const JGT_K: u16 = 0x25;
/// `BPF_JMP | BPF_JGE | BPF_K`.
pub const JGE_K: u16 = 0x35;
/// `BPF_JMP | BPF_JSET | BPF_K`.
pub const JSET_K: u16 = 0x45;
/// `BPF_RET | BPF_K`.
pub const RET_K: u16 = 0x06;

/// Offsets in `struct seccomp_data`: the syscall number, the architecture, and the
/// first argument's two words (arguments are u64, little-endian on both architectures:
/// the low word first). The calls judged here take an `int` or `unsigned int` first
/// argument, which the kernel reads from the low word alone.
pub const OFFSET_NR: u32 = 0;
/// See [`OFFSET_NR`].
pub const OFFSET_ARCH: u32 = 4;
/// See [`OFFSET_NR`].
pub const OFFSET_ARG0_LO: u32 = 16;
/// See [`OFFSET_NR`].
pub const OFFSET_ARG0_HI: u32 = 20;

/// The most instructions a filter of this builder has.
pub const MAX_LEN: usize = 128;

/// One classic BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// The opcode.
    pub code: u16,
    /// Instructions to skip when a jump's condition holds.
    pub jt: u8,
    /// Instructions to skip when it does not.
    pub jf: u8,
    /// The constant operand.
    pub k: u32,
}

const fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// Calls refused with `EPERM` whatever the policy (see the module's doc).
pub const HARDENING: &[u32] = &[
    sys::IO_URING_SETUP,
    sys::IO_URING_ENTER,
    sys::IO_URING_REGISTER,
    sys::USERFAULTFD,
    sys::PERF_EVENT_OPEN,
    sys::BPF,
    sys::PTRACE,
    sys::PROCESS_VM_READV,
    sys::PROCESS_VM_WRITEV,
    sys::KEYCTL,
    sys::ADD_KEY,
    sys::REQUEST_KEY,
    sys::PIDFD_GETFD,
    sys::PIDFD_SEND_SIGNAL,
    sys::TKILL,
];

/// Calls whose first argument names a process to signal (or to get a pidfd of).
pub const SIGNALS: &[u32] = &[
    sys::KILL,
    sys::TGKILL,
    sys::RT_SIGQUEUEINFO,
    sys::RT_TGSIGQUEUEINFO,
    sys::PIDFD_OPEN,
];

/// What the filter is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// No process and no program but the interpreter (a policy that denies them).
    pub floor: bool,
    /// The address of the path the supervisor's own `execve` names.
    pub exec_path: u64,
    /// The supervisor's pid (and process group), as the interpreter sees it.
    pub supervisor: u32,
    /// A listener takes user notifications: `exit_group` goes to it. (Without one a
    /// notified call fails, and a failed `exit_group` would leave the process running.)
    pub notify: bool,
}

/// Where a jump goes; resolved to relative offsets once the program is laid out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum To {
    Next,
    Allow,
    Eperm,
    Enosys,
    Notify,
    Clone,
    Exec,
    Signal,
    Read,
}

const LABELS: usize = 9;

/// A filter program: at most [`MAX_LEN`] instructions.
pub struct Filter {
    insns: [Insn; MAX_LEN],
    /// Per instruction: the symbolic targets of a conditional jump (true, false).
    targets: [(To, To); MAX_LEN],
    len: usize,
    labels: [Option<usize>; LABELS],
}

/// Why a filter could not be built (a bug of this module, never of its input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterError {
    /// More than [`MAX_LEN`] instructions.
    TooLong,
    /// A jump backwards, to nowhere, or further than 255 instructions.
    BadJump,
}

impl Filter {
    /// The filter for `rules`.
    pub fn build(rules: Rules) -> Result<Filter, FilterError> {
        let mut filter = Filter {
            insns: [stmt(0, 0); MAX_LEN],
            targets: [(To::Next, To::Next); MAX_LEN],
            len: 0,
            labels: [None; LABELS],
        };
        filter.lay_out(rules)?;
        filter.resolve()?;
        Ok(filter)
    }

    /// The instructions, ready for `seccomp(SECCOMP_SET_MODE_FILTER)`.
    pub fn instructions(&self) -> &[Insn] {
        &self.insns[..self.len]
    }

    fn push(&mut self, insn: Insn, targets: (To, To)) -> Result<(), FilterError> {
        if self.len == MAX_LEN {
            return Err(FilterError::TooLong);
        }
        self.insns[self.len] = insn;
        self.targets[self.len] = targets;
        self.len += 1;
        Ok(())
    }

    fn load(&mut self, offset: u32) -> Result<(), FilterError> {
        self.push(stmt(LD_W_ABS, offset), (To::Next, To::Next))
    }

    fn ret(&mut self, value: u32) -> Result<(), FilterError> {
        self.push(stmt(RET_K, value), (To::Next, To::Next))
    }

    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) -> Result<(), FilterError> {
        self.push(stmt(code, k), (jt, jf))
    }

    fn label(&mut self, at: To) {
        self.labels[at as usize] = Some(self.len);
    }

    fn lay_out(&mut self, rules: Rules) -> Result<(), FilterError> {
        self.load(OFFSET_ARCH)?;
        // Our ABI goes on past the kill; any other is killed.
        self.push(
            Insn {
                code: JEQ_K,
                jt: 1,
                jf: 0,
                k: sys::AUDIT_ARCH,
            },
            (To::Next, To::Next),
        )?;
        self.ret(RET_KILL_PROCESS)?;
        self.load(OFFSET_NR)?;
        self.jump(JGE_K, sys::X32_BIT, To::Eperm, To::Next)?;
        for &nr in HARDENING {
            self.jump(JEQ_K, nr, To::Eperm, To::Next)?;
        }
        for &nr in SIGNALS {
            self.jump(JEQ_K, nr, To::Signal, To::Next)?;
        }
        self.jump(JEQ_K, sys::READ, To::Read, To::Next)?;
        if rules.notify {
            self.jump(JEQ_K, sys::EXIT_GROUP, To::Notify, To::Next)?;
        }
        if rules.floor {
            self.jump(JEQ_K, sys::EXECVE, To::Exec, To::Next)?;
            self.jump(JEQ_K, sys::EXECVEAT, To::Notify, To::Next)?;
            self.jump(JEQ_K, sys::FORK, To::Notify, To::Next)?;
            self.jump(JEQ_K, sys::VFORK, To::Notify, To::Next)?;
            self.jump(JEQ_K, sys::CLONE3, To::Enosys, To::Next)?;
            self.jump(JEQ_K, sys::CLONE, To::Clone, To::Next)?;
        }
        self.ret(RET_ALLOW)?;

        // Signals: never to the supervisor, its group, the box's init, or everyone.
        self.label(To::Signal);
        self.load(OFFSET_ARG0_LO)?;
        for target in [
            1,
            rules.supervisor,
            rules.supervisor.wrapping_neg(),
            u32::MAX, // -1: every process the caller may signal
        ] {
            self.jump(JEQ_K, target, To::Eperm, To::Next)?;
        }
        self.ret(RET_ALLOW)?;

        // The call channel's fd numbers go to the supervisor.
        self.label(To::Read);
        self.load(OFFSET_ARG0_LO)?;
        self.jump(JGE_K, CHANNEL.start, To::Next, To::Allow)?;
        self.jump(JGE_K, CHANNEL.end, To::Allow, To::Notify)?;

        if rules.floor {
            // clone: a thread (CLONE_THREAD in the flags, argument 0), or the supervisor
            // refuses it.
            self.label(To::Clone);
            self.load(OFFSET_ARG0_LO)?;
            self.jump(JSET_K, CLONE_THREAD, To::Allow, To::Notify)?;
            // execve: only the one path address.
            self.label(To::Exec);
            self.load(OFFSET_ARG0_LO)?;
            self.jump(JEQ_K, rules.exec_path as u32, To::Next, To::Notify)?;
            self.load(OFFSET_ARG0_HI)?;
            self.jump(JEQ_K, (rules.exec_path >> 32) as u32, To::Allow, To::Notify)?;
        }
        self.label(To::Allow);
        self.ret(RET_ALLOW)?;
        self.label(To::Notify);
        self.ret(RET_USER_NOTIF)?;
        self.label(To::Eperm);
        self.ret(RET_ERRNO | EPERM)?;
        self.label(To::Enosys);
        self.ret(RET_ERRNO | ENOSYS)
    }

    /// Fills in the relative offsets; every jump goes forward, as BPF requires.
    fn resolve(&mut self) -> Result<(), FilterError> {
        for i in 0..self.len {
            let (jt, jf) = self.targets[i];
            if (jt, jf) == (To::Next, To::Next) {
                continue; // a plain statement, or a jump laid out by hand
            }
            self.insns[i].jt = self.offset(i, jt)?;
            self.insns[i].jf = self.offset(i, jf)?;
        }
        Ok(())
    }

    fn offset(&self, from: usize, to: To) -> Result<u8, FilterError> {
        if to == To::Next {
            return Ok(0);
        }
        let target = self.labels[to as usize].ok_or(FilterError::BadJump)?;
        if target <= from || target - from - 1 > 255 {
            return Err(FilterError::BadJump);
        }
        Ok((target - from - 1) as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `struct seccomp_data` as the kernel hands it to the filter.
    struct Data {
        nr: u32,
        arch: u32,
        arg0: u64,
    }

    impl Data {
        fn word(&self, offset: u32) -> u32 {
            match offset {
                OFFSET_NR => self.nr,
                OFFSET_ARCH => self.arch,
                OFFSET_ARG0_LO => self.arg0 as u32,
                OFFSET_ARG0_HI => (self.arg0 >> 32) as u32,
                other => panic!("the filter reads seccomp_data at {other}"),
            }
        }
    }

    /// Runs a classic BPF program as the kernel would, for the opcodes the builder
    /// emits; any other opcode, a jump out of the program or falling off its end is a
    /// test failure (the kernel would reject such a program).
    fn run(program: &[Insn], data: &Data) -> u32 {
        let mut accumulator = 0u32;
        let mut pc = 0usize;
        loop {
            let insn = program.get(pc).expect("the program ends in a return");
            pc += 1;
            let taken = match insn.code {
                LD_W_ABS => {
                    accumulator = data.word(insn.k);
                    continue;
                }
                RET_K => return insn.k,
                JEQ_K => accumulator == insn.k,
                JGT_K => accumulator > insn.k,
                JGE_K => accumulator >= insn.k,
                JSET_K => accumulator & insn.k != 0,
                other => panic!("unexpected opcode {other:#x}"),
            };
            pc += usize::from(if taken { insn.jt } else { insn.jf });
        }
    }

    const PATH: u64 = 0x1234_5678_9abc_d000;
    const SUPERVISOR: u32 = 7;

    fn rules(floor: bool) -> Rules {
        Rules {
            floor,
            exec_path: PATH,
            supervisor: SUPERVISOR,
            notify: true,
        }
    }

    fn decide(floor: bool, nr: u32, arg0: u64) -> u32 {
        decide_under(rules(floor), nr, arg0)
    }

    fn decide_under(rules: Rules, nr: u32, arg0: u64) -> u32 {
        let filter = Filter::build(rules).expect("the filter builds");
        let data = Data {
            nr,
            arch: sys::AUDIT_ARCH,
            arg0,
        };
        run(filter.instructions(), &data)
    }

    const EPERM_: u32 = RET_ERRNO | EPERM;

    #[test]
    fn another_architecture_is_killed() {
        let filter = Filter::build(rules(true)).unwrap();
        let foreign = Data {
            nr: sys::EXECVE,
            arch: 0x4000_0003, // AUDIT_ARCH_I386
            arg0: PATH,
        };
        assert_eq!(run(filter.instructions(), &foreign), RET_KILL_PROCESS);
    }

    #[test]
    fn the_hardening_list_is_refused_with_or_without_the_floor() {
        for floor in [false, true] {
            for &nr in HARDENING {
                assert_eq!(decide(floor, nr, 0), EPERM_, "nr {nr}");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_numbers_are_refused() {
        assert_eq!(decide(false, sys::X32_BIT | 1, 0), EPERM_);
    }

    #[test]
    fn the_supervisor_init_and_everyone_cannot_be_signalled() {
        for floor in [false, true] {
            for &nr in SIGNALS {
                for target in [1u64, 7, (-7i64) as u64, u64::MAX, 0xffff_ffff] {
                    assert_eq!(decide(floor, nr, target), EPERM_, "nr {nr} at {target:#x}");
                }
                // The program itself, its own group (0) and other processes it started.
                for target in [0u64, 8, 42] {
                    assert_eq!(decide(floor, nr, target), RET_ALLOW, "nr {nr} at {target}");
                }
            }
        }
    }

    #[test]
    fn the_call_channel_goes_to_the_supervisor_and_other_reads_pass() {
        for floor in [false, true] {
            for fd in [CHANNEL.start, CHANNEL.start + 1, CHANNEL.start + 255, READY] {
                assert_eq!(decide(floor, sys::READ, u64::from(fd)), RET_USER_NOTIF);
            }
            for fd in [0u32, 3, CHANNEL.start - 1, CHANNEL.end, u32::MAX] {
                assert_eq!(
                    decide(floor, sys::READ, u64::from(fd)),
                    RET_ALLOW,
                    "fd {fd}"
                );
            }
            // The kernel reads the low word only: high bits do not hide a channel read.
            let disguised = (1u64 << 32) | u64::from(READY);
            assert_eq!(decide(floor, sys::READ, disguised), RET_USER_NOTIF);
        }
    }

    #[test]
    fn the_floor_hands_every_new_process_or_program_to_the_supervisor() {
        assert_eq!(decide(true, sys::EXECVEAT, PATH), RET_USER_NOTIF);
        assert_eq!(decide(true, sys::CLONE3, 0), RET_ERRNO | ENOSYS);
        // A process: clone without CLONE_THREAD (fork's flags: SIGCHLD and the tid
        // settings).
        assert_eq!(decide(true, sys::CLONE, 0x0120_0011), RET_USER_NOTIF);
        if sys::FORK != u32::MAX {
            assert_eq!(decide(true, sys::FORK, 0), RET_USER_NOTIF);
            assert_eq!(decide(true, sys::VFORK, 0), RET_USER_NOTIF);
        }
        // Any execve but the one at the supervisor's own address, however close.
        for other in [0, PATH + 8, PATH ^ (1 << 40), PATH & 0xffff_ffff] {
            assert_eq!(
                decide(true, sys::EXECVE, other),
                RET_USER_NOTIF,
                "{other:#x}"
            );
        }
    }

    #[test]
    fn exit_group_goes_to_the_supervisor_only_where_a_listener_takes_it() {
        for floor in [true, false] {
            assert_eq!(decide(floor, sys::EXIT_GROUP, 3), RET_USER_NOTIF);
            // A thread's own `exit` is no process's end.
            assert_eq!(decide(floor, sys::EXIT, 3), RET_ALLOW);
            let without = Rules {
                notify: false,
                ..rules(floor)
            };
            assert_eq!(decide_under(without, sys::EXIT_GROUP, 3), RET_ALLOW);
        }
    }

    #[test]
    fn the_floor_lets_threads_and_the_one_exec_through() {
        // glibc's pthread_create flags: CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|...
        assert_eq!(decide(true, sys::CLONE, 0x003d_0f00), RET_ALLOW);
        assert_eq!(decide(true, sys::EXECVE, PATH), RET_ALLOW);
        assert_eq!(decide(true, sys::WRITE, 1), RET_ALLOW);
    }

    #[test]
    fn without_the_floor_processes_are_the_policys_business() {
        assert_eq!(decide(false, sys::EXECVE, 0), RET_ALLOW);
        assert_eq!(decide(false, sys::CLONE, 0x0120_0011), RET_ALLOW);
        assert_eq!(decide(false, sys::EXECVEAT, 0), RET_ALLOW);
    }

    #[test]
    fn every_jump_lands_inside_the_program() {
        for floor in [false, true] {
            let filter = Filter::build(rules(floor)).unwrap();
            let program = filter.instructions();
            assert!(program.len() <= MAX_LEN);
            for (i, insn) in program.iter().enumerate() {
                if matches!(insn.code, JEQ_K | JGT_K | JGE_K | JSET_K) {
                    assert!(i + 1 + usize::from(insn.jt.max(insn.jf)) < program.len());
                }
            }
            assert_eq!(program.last().unwrap().code, RET_K);
        }
    }
}
