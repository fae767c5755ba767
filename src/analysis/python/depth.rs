//! A bound on syntax-tree depth, computed before parsing.
//!
//! Brackets are capped by the caller, but chains need none: `-` repeated 40,000 times,
//! `1+1+…`, `not not …`, `lambda: lambda: …` or a long `elif` ladder each nest one level
//! per token, and the parser (and dropping its tree) recurses once per level, which
//! overflows a thread's stack. This scan never recurses: within each comma-separated
//! item of each bracket level it counts tokens (every syntax-tree node on a root-to-leaf
//! path owns a distinct token at its level, and a path enters at most one bracket group
//! per level), adds the deepest group inside, the line's indentation and every `elif`
//! seen so far. The result is an upper bound on the depth; it is loose, so the limit is
//! set far above what ordinary code reaches.

/// Deepest tree the parser is trusted with (it survives about 15,000 on a 2 MiB stack).
pub const MAX_ESTIMATED_DEPTH: u32 = 5_000;

#[derive(Default)]
struct Level {
    /// Tokens in the current item at this level.
    tokens: u32,
    /// Deepest bracket group in the current item.
    deepest_child: u32,
    /// Deepest finished item.
    deepest_item: u32,
}

impl Level {
    fn item(&self) -> u32 {
        self.tokens.saturating_add(self.deepest_child)
    }
    fn finish_item(&mut self) {
        self.deepest_item = self.deepest_item.max(self.item());
        self.tokens = 0;
        self.deepest_child = 0;
    }
    fn depth(&self) -> u32 {
        self.deepest_item.max(self.item())
    }
}

/// The byte offset where the estimated depth first passes [`MAX_ESTIMATED_DEPTH`].
pub fn too_deep(source: &str) -> Option<usize> {
    let bytes = source.as_bytes();
    let mut levels: Vec<Level> = vec![Level::default()];
    // Sum of `item() + 1` over every open level below the top one: while a group is
    // open its parents' items cannot change, so this is updated on push and pop only.
    let mut outer: Vec<u32> = vec![0];
    let mut indentation = 0u32;
    let mut elifs = 0u32;
    let mut at_line_start = true;
    let mut i = 0usize;
    while i < bytes.len() {
        let byte = bytes[i];
        if at_line_start {
            let mut width = 0u32;
            while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\x0c') {
                width += if bytes[i] == b'\t' { 8 } else { 1 };
                i += 1;
            }
            if levels.len() == 1 {
                indentation = width;
            }
            at_line_start = false;
            continue;
        }
        match byte {
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'\n') => {
                i += 2;
                continue;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'\r') => {
                i += if bytes.get(i + 2) == Some(&b'\n') {
                    3
                } else {
                    2
                };
                continue;
            }
            b'\n' | b';' => {
                if levels.len() == 1 {
                    levels[0].finish_item();
                    if byte == b'\n' {
                        at_line_start = true;
                    }
                }
            }
            b',' => {
                if let Some(level) = levels.last_mut() {
                    level.finish_item();
                }
            }
            b'(' | b'[' | b'{' => {
                let below = outer.last().copied().unwrap_or(0);
                if let Some(level) = levels.last_mut() {
                    level.tokens = level.tokens.saturating_add(1);
                    outer.push(below.saturating_add(level.item()).saturating_add(1));
                }
                levels.push(Level::default());
            }
            b')' | b']' | b'}' => {
                if levels.len() > 1 {
                    outer.pop();
                    let inner = levels.pop().map(|l| l.depth()).unwrap_or(0);
                    if let Some(level) = levels.last_mut() {
                        level.deepest_child = level.deepest_child.max(inner);
                    }
                }
            }
            b'\'' | b'"' => {
                let (end, weight) = skip_string(bytes, i, is_fstring(bytes, i));
                if let Some(level) = levels.last_mut() {
                    level.tokens = level.tokens.saturating_add(weight);
                }
                i = end;
                continue;
            }
            b' ' | b'\t' | b'\r' | b'\x0c' => {}
            _ => {
                let start = i;
                if byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80 {
                    while i < bytes.len()
                        && (bytes[i].is_ascii_alphanumeric()
                            || bytes[i] == b'_'
                            || bytes[i] >= 0x80)
                    {
                        i += 1;
                    }
                    if &bytes[start..i] == b"elif" {
                        elifs = elifs.saturating_add(1);
                    }
                } else {
                    i += 1;
                }
                if let Some(level) = levels.last_mut() {
                    level.tokens = level.tokens.saturating_add(1);
                }
                if estimate(&levels, &outer, indentation, elifs) > MAX_ESTIMATED_DEPTH {
                    return Some(start);
                }
                continue;
            }
        }
        if estimate(&levels, &outer, indentation, elifs) > MAX_ESTIMATED_DEPTH {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The bound so far: open levels nest, so their current items add up.
fn estimate(levels: &[Level], outer: &[u32], indentation: u32, elifs: u32) -> u32 {
    let top = levels.last().map(|l| l.item()).unwrap_or(0);
    let open = outer.last().copied().unwrap_or(0).saturating_add(top);
    let closed = levels.first().map(|l| l.deepest_item).unwrap_or(0);
    open.max(closed)
        .saturating_add(indentation)
        .saturating_add(elifs)
}

/// True when the quote at `quote` has a string prefix containing `f` (`f'…'`, `rf"…"`).
fn is_fstring(bytes: &[u8], quote: usize) -> bool {
    let prefix_start = bytes[..quote]
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_' || **b >= 0x80)
        .count();
    let prefix = &bytes[quote - prefix_start..quote];
    prefix.len() <= 2 && prefix.iter().any(|b| matches!(b, b'f' | b'F'))
}

/// Skips a string literal starting at `start` (the quote; prefixes were counted as a
/// token already). Returns the offset after it and how many tokens it may hide: one,
/// or for an f-string, one per punctuation byte inside (its fields are expressions).
fn skip_string(bytes: &[u8], start: usize, fstring: bool) -> (usize, u32) {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    let mut weight = 1u32;
    while i < bytes.len() {
        let byte = bytes[i];
        if byte == b'\\' {
            i += 2;
            continue;
        }
        if byte == quote {
            if !triple {
                return (i + 1, weight);
            }
            if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                return (i + 3, weight);
            }
        }
        if byte == b'\n' && !triple {
            return (i, weight);
        }
        if fstring && byte.is_ascii_punctuation() {
            weight = weight.saturating_add(1);
        }
        i += 1;
    }
    (bytes.len(), weight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_are_caught() {
        for chain in ["1+", "not ", "-", "a.", "lambda: "] {
            let source = format!("x = {}1\n", chain.repeat(40_000));
            assert!(too_deep(&source).is_some(), "{chain}");
        }
        let elifs: String = (0..6000)
            .map(|i| format!("elif x == {i}:\n    pass\n"))
            .collect();
        assert!(too_deep(&format!("if x:\n    pass\n{elifs}")).is_some());
    }

    #[test]
    fn ordinary_code_passes() {
        let data = format!("data = [{}]\n", "-1, ".repeat(50_000));
        assert!(too_deep(&data).is_none());
        let lines = "total = a * b + c - d / e\n".repeat(10_000);
        assert!(too_deep(&lines).is_none());
        let strings = format!("s = '{}'\n", "+-.,".repeat(10_000));
        assert!(too_deep(&strings).is_none());
        let fstring = format!("s = f'{{{}1}}'\n", "-".repeat(10_000));
        assert!(too_deep(&fstring).is_some());
    }
}
