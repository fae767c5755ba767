//! The seccomp filter `exec-guard` installs: a classic BPF program, built here from the
//! architecture's syscall numbers without any allocation (the guard has no heap), and
//! pure, so that the host's tests can run it on an interpreter of their own.
//!
//! What it decides, in order:
//! - another architecture's calling convention is killed (numbers could be aliased);
//! - on x86-64, x32 syscalls (numbers with bit 30 set) fail with `EPERM`;
//! - the [`HARDENING`] calls fail with `EPERM`, whatever the policy;
//! - with the floor: `execve` passes only when its path argument is the one address
//!   the guard names (its own `execve` of the interpreter); `execveat`, `fork` and
//!   `vfork` fail with `EPERM`; `clone3` fails with `ENOSYS` (so libc falls back to
//!   `clone`, whose flags a classic filter can read); `clone` passes only with
//!   `CLONE_THREAD` (a thread, never a process);
//! - everything else passes.

use crate::sys;

/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = 0x7fff_0000;
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

/// `BPF_LD | BPF_W | BPF_ABS`: load a word of `seccomp_data`.
pub const LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
pub const JEQ_K: u16 = 0x15;
/// `BPF_JMP | BPF_JGE | BPF_K`.
pub const JGE_K: u16 = 0x35;
/// `BPF_JMP | BPF_JSET | BPF_K`.
pub const JSET_K: u16 = 0x45;
/// `BPF_RET | BPF_K`.
pub const RET_K: u16 = 0x06;

/// Offsets in `struct seccomp_data`: the syscall number, the architecture, and the
/// first argument's two words (arguments are u64, little-endian on both architectures:
/// the low word first).
pub const OFFSET_NR: u32 = 0;
/// See [`OFFSET_NR`].
pub const OFFSET_ARCH: u32 = 4;
/// See [`OFFSET_NR`].
pub const OFFSET_ARG0_LO: u32 = 16;
/// See [`OFFSET_NR`].
pub const OFFSET_ARG0_HI: u32 = 20;

/// The most instructions a filter of this builder has.
pub const MAX_LEN: usize = 64;

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

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

/// Calls no sandboxed program needs, refused with `EPERM` whatever the policy: the
/// engine's default profile already refuses most of them; `io_uring_*` it allows in
/// older engines, and it is a route around syscall filtering altogether.
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
];

/// Where a jump goes; resolved to relative offsets once the program is laid out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    Allow,
    Eperm,
    Enosys,
    Clone,
    Exec,
}

/// A filter program: at most [`MAX_LEN`] instructions.
pub struct Filter {
    insns: [Insn; MAX_LEN],
    /// Per instruction: the symbolic targets of a conditional jump (true, false).
    targets: [(To, To); MAX_LEN],
    len: usize,
    labels: [usize; 6],
}

/// Why a filter could not be built (a bug of this module, never of its input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterError {
    /// More than [`MAX_LEN`] instructions.
    TooLong,
    /// A jump backwards or further than 255 instructions.
    BadJump,
}

impl Filter {
    fn empty() -> Filter {
        Filter {
            insns: [stmt(0, 0); MAX_LEN],
            targets: [(To::Next, To::Next); MAX_LEN],
            len: 0,
            labels: [0; 6],
        }
    }

    /// The filter: the hardening list always; with `floor`, no fork and no exec but of
    /// the path at address `exec_path`, the one address the guard's own `execve` names.
    pub fn build(floor: bool, exec_path: u64) -> Result<Filter, FilterError> {
        let mut filter = Filter::empty();
        filter.lay_out(floor, exec_path)?;
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

    fn stmt(&mut self, code: u16, k: u32) -> Result<(), FilterError> {
        self.push(stmt(code, k), (To::Next, To::Next))
    }

    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) -> Result<(), FilterError> {
        self.push(jump(code, k, 0, 0), (jt, jf))
    }

    fn label(&mut self, at: To) {
        self.labels[at as usize] = self.len;
    }

    fn lay_out(&mut self, floor: bool, exec_path: u64) -> Result<(), FilterError> {
        let lo = exec_path as u32;
        let hi = (exec_path >> 32) as u32;
        self.stmt(LD_W_ABS, OFFSET_ARCH)?;
        // Our ABI goes on past the kill; any other is killed.
        self.push(jump(JEQ_K, sys::AUDIT_ARCH, 1, 0), (To::Next, To::Next))?;
        self.stmt(RET_K, RET_KILL_PROCESS)?;
        self.stmt(LD_W_ABS, OFFSET_NR)?;
        self.jump(JGE_K, sys::X32_BIT, To::Eperm, To::Next)?;
        for &nr in HARDENING {
            self.jump(JEQ_K, nr, To::Eperm, To::Next)?;
        }
        if floor {
            self.jump(JEQ_K, sys::EXECVE, To::Exec, To::Next)?;
            self.jump(JEQ_K, sys::EXECVEAT, To::Eperm, To::Next)?;
            self.jump(JEQ_K, sys::FORK, To::Eperm, To::Next)?;
            self.jump(JEQ_K, sys::VFORK, To::Eperm, To::Next)?;
            self.jump(JEQ_K, sys::CLONE3, To::Enosys, To::Next)?;
            self.jump(JEQ_K, sys::CLONE, To::Clone, To::Next)?;
        }
        self.stmt(RET_K, RET_ALLOW)?;
        if floor {
            // clone: a thread (CLONE_THREAD in the flags, argument 0) or nothing.
            self.label(To::Clone);
            self.stmt(LD_W_ABS, OFFSET_ARG0_LO)?;
            self.jump(JSET_K, CLONE_THREAD, To::Allow, To::Eperm)?;
            // execve: only the one path address.
            self.label(To::Exec);
            self.stmt(LD_W_ABS, OFFSET_ARG0_LO)?;
            self.jump(JEQ_K, lo, To::Next, To::Eperm)?;
            self.stmt(LD_W_ABS, OFFSET_ARG0_HI)?;
            self.jump(JEQ_K, hi, To::Allow, To::Eperm)?;
        }
        self.label(To::Allow);
        self.stmt(RET_K, RET_ALLOW)?;
        self.label(To::Eperm);
        self.stmt(RET_K, RET_ERRNO | EPERM)?;
        self.label(To::Enosys);
        self.stmt(RET_K, RET_ERRNO | ENOSYS)
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
        let target = self.labels[to as usize];
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
        fn call(nr: u32, arg0: u64) -> Data {
            Data {
                nr,
                arch: sys::AUDIT_ARCH,
                arg0,
            }
        }

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
                JGE_K => accumulator >= insn.k,
                JSET_K => accumulator & insn.k != 0,
                other => panic!("unexpected opcode {other:#x}"),
            };
            pc += usize::from(if taken { insn.jt } else { insn.jf });
        }
    }

    const PATH: u64 = 0x1234_5678_9abc_d000;

    fn decide(floor: bool, nr: u32, arg0: u64) -> u32 {
        let filter = Filter::build(floor, PATH).expect("the filter builds");
        run(filter.instructions(), &Data::call(nr, arg0))
    }

    #[test]
    fn another_architecture_is_killed() {
        let filter = Filter::build(true, PATH).unwrap();
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
                assert_eq!(decide(floor, nr, 0), RET_ERRNO | EPERM, "nr {nr}");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_numbers_are_refused() {
        assert_eq!(decide(false, sys::X32_BIT | 1, 0), RET_ERRNO | EPERM);
    }

    #[test]
    fn the_floor_refuses_every_way_to_a_new_process_or_program() {
        assert_eq!(decide(true, sys::EXECVEAT, PATH), RET_ERRNO | EPERM);
        assert_eq!(decide(true, sys::CLONE3, 0), RET_ERRNO | ENOSYS);
        // A process: clone without CLONE_THREAD (fork's flags: SIGCHLD and the tid
        // settings).
        assert_eq!(decide(true, sys::CLONE, 0x0120_0011), RET_ERRNO | EPERM);
        if sys::FORK != u32::MAX {
            assert_eq!(decide(true, sys::FORK, 0), RET_ERRNO | EPERM);
            assert_eq!(decide(true, sys::VFORK, 0), RET_ERRNO | EPERM);
        }
        // Any execve but the one at the guard's own address, however close.
        for other in [0, PATH + 8, PATH ^ (1 << 40), PATH & 0xffff_ffff] {
            assert_eq!(
                decide(true, sys::EXECVE, other),
                RET_ERRNO | EPERM,
                "{other:#x}"
            );
        }
    }

    #[test]
    fn the_floor_lets_threads_and_the_one_exec_through() {
        // glibc's pthread_create flags: CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|...
        assert_eq!(decide(true, sys::CLONE, 0x003d_0f00), RET_ALLOW);
        assert_eq!(decide(true, sys::EXECVE, PATH), RET_ALLOW);
        // Ordinary calls pass.
        assert_eq!(decide(true, sys::WRITE as u32, 1), RET_ALLOW);
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
            let filter = Filter::build(floor, PATH).unwrap();
            let program = filter.instructions();
            assert!(program.len() <= MAX_LEN);
            for (i, insn) in program.iter().enumerate() {
                if matches!(insn.code, JEQ_K | JGE_K | JSET_K) {
                    assert!(i + 1 + usize::from(insn.jt.max(insn.jf)) < program.len());
                }
            }
            assert_eq!(program.last().unwrap().code, RET_K);
        }
    }
}
