//! A POSIX-shell-words reader, enough to see which commands a line runs (pure).
//!
//! It splits a command line into simple commands at control operators (`;`, `&`,
//! `&&`, `|`, `||`, newlines, parentheses), removes quotes and backslashes the way
//! the shell does, and reads every command substitution (`$(…)`, backticks,
//! `<(…)`, `>(…)`) as commands of its own. A word whose value is only known when
//! the line runs (a variable, a substitution, ANSI-C quoting, an unquoted glob or
//! brace) is marked `dynamic`. Here-document bodies are skipped; arithmetic
//! (`((…))`, `$((…))`, `$[…]`) that names anything but numbers, and an unquoted
//! here-document body holding a substitution, add a command that is unknown. A
//! line it cannot read (an unterminated quote or substitution, a `case` inside
//! `$(…)`, nesting too deep) is `broken`.

/// One word, quotes removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    pub text: String,
    /// Its value is only known when the line runs.
    pub dynamic: bool,
    /// Some of it was quoted or escaped (so it is never a keyword).
    pub quoted: bool,
    /// Where (a byte offset in `text`) its first quoted or escaped part starts: an
    /// assignment's name must come before it (`X='' rm`, not `'X'=1 rm`).
    pub quote_at: Option<usize>,
}

/// One simple command: its words (assignments included) and whether it redirects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Simple {
    pub words: Vec<Word>,
    pub redirected: bool,
}

/// A command line as read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Line {
    pub commands: Vec<Simple>,
    /// It holds a command substitution (its commands are in `commands` too).
    pub substituted: bool,
    /// It could not be read.
    pub broken: bool,
}

/// How deep substitutions may nest before a line counts as broken.
const MAX_DEPTH: usize = 16;

/// Reads a command line.
pub fn parse(s: &str) -> Line {
    let chars: Vec<char> = s.chars().collect();
    let mut r = Reader::new(&chars, 0);
    r.run(None);
    if r.i < chars.len() {
        r.line.broken = true;
    }
    r.line
}

struct Reader<'a> {
    c: &'a [char],
    i: usize,
    line: Line,
    cur: Simple,
    word: Option<Word>,
    /// The next word is a redirection's target, not an argument.
    target: bool,
    /// The word has an unquoted `{` (brace expansion if it also has `,` or `..`)
    /// or `[` (a glob if a `]` follows).
    brace: bool,
    bracket: bool,
    depth: usize,
    /// What ends this reader (`)` for `$(…)`).
    closer: Option<char>,
    /// The next target word is a here-document's delimiter (`<<-`: tabs stripped).
    delimiter: Option<bool>,
    /// Here-documents whose bodies start after the next newline: delimiter,
    /// whether it was quoted, whether leading tabs are stripped.
    heredocs: Vec<(String, bool, bool)>,
}

impl<'a> Reader<'a> {
    fn new(c: &'a [char], depth: usize) -> Self {
        Reader {
            c,
            i: 0,
            line: Line::default(),
            cur: Simple::default(),
            word: None,
            target: false,
            brace: false,
            bracket: false,
            depth,
            closer: None,
            delimiter: None,
            heredocs: Vec::new(),
        }
    }

    fn peek(&self, k: usize) -> Option<char> {
        self.c.get(self.i + k).copied()
    }

    fn word(&mut self) -> &mut Word {
        self.word.get_or_insert_with(Word::default)
    }

    fn end_word(&mut self) {
        if let Some(mut w) = self.word.take() {
            if std::mem::take(&mut self.brace) && (w.text.contains(',') || w.text.contains("..")) {
                w.dynamic = true;
            }
            if std::mem::take(&mut self.bracket) && w.text.len() > 1 && w.text.contains(']') {
                w.dynamic = true;
            }
            if std::mem::take(&mut self.target) {
                if let Some(strip) = self.delimiter.take() {
                    self.line.broken |= w.dynamic;
                    self.heredocs.push((w.text, w.quoted, strip));
                }
                return;
            }
            // `case` patterns end in `)`, which this reader would take for the end
            // of `$(`.
            if self.closer == Some(')') && !w.quoted && w.text == "case" {
                self.line.broken = true;
            }
            self.cur.words.push(w);
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        self.target = false;
        self.delimiter = None;
        let c = std::mem::take(&mut self.cur);
        if !c.words.is_empty() || c.redirected {
            self.line.commands.push(c);
        }
    }

    /// Reads until the end, or until `closer` at paren depth 0 (consumed).
    fn run(&mut self, closer: Option<char>) {
        self.closer = closer;
        let mut parens = 0usize;
        while let Some(ch) = self.peek(0) {
            if Some(ch) == closer && (ch == '`' || parens == 0) {
                self.i += 1;
                self.end_command();
                self.line.broken |= !self.heredocs.is_empty();
                return;
            }
            match ch {
                '(' if self.peek(1) == Some('(') && self.word.is_none() => {
                    self.end_command();
                    self.arithmetic(true);
                }
                '\n' => {
                    self.end_command();
                    self.i += 1;
                    self.bodies();
                }
                ' ' | '\t' => {
                    self.end_word();
                    self.i += 1;
                }
                '(' | ')' if closer == Some(')') => {
                    parens = if ch == '(' { parens + 1 } else { parens - 1 };
                    self.end_command();
                    self.i += 1;
                }
                ';' | '|' | '(' | ')' => {
                    self.end_command();
                    self.i += 1;
                }
                '&' if self.peek(1) == Some('>') => self.redirect(),
                '&' => {
                    self.end_command();
                    self.i += 1;
                }
                '<' | '>' => self.redirect(),
                '#' if self.word.is_none() => self.comment(),
                _ => self.word_char(ch),
            }
            if self.line.broken {
                return;
            }
        }
        if closer.is_some() {
            self.line.broken = true;
        }
        self.end_command();
    }

    fn comment(&mut self) {
        while let Some(ch) = self.peek(0) {
            if ch == '\n' {
                break;
            }
            self.i += 1;
        }
    }

    /// `>`, `>>`, `2>&1`, `&>`, `<<`, `<(…)`, …: marks the command; its target word is
    /// dropped; a process substitution is read as commands.
    fn redirect(&mut self) {
        let fd = self
            .word
            .as_ref()
            .is_some_and(|w| !w.quoted && w.text.chars().all(|c| c.is_ascii_digit()));
        if fd {
            self.word = None;
        } else {
            self.end_word();
        }
        self.cur.redirected = true;
        if matches!(self.peek(1), Some('(')) && matches!(self.peek(0), Some('<' | '>')) {
            self.i += 2;
            self.substitution(')');
            self.end_word();
            return;
        }
        let mut op = String::new();
        while let Some(c @ ('<' | '>' | '&' | '|' | '-')) = self.peek(0) {
            op.push(c);
            self.i += 1;
        }
        if op.ends_with("&-") {
            return; // closes a descriptor: no target word
        }
        if op.starts_with("<<") && !op.starts_with("<<<") {
            self.delimiter = Some(op.ends_with('-'));
        }
        self.target = true;
    }

    /// Skips the bodies of the here-documents opened on the line just ended; an
    /// unquoted body that holds a substitution adds an unknown command.
    fn bodies(&mut self) {
        for (delimiter, quoted, strip) in std::mem::take(&mut self.heredocs) {
            while self.i < self.c.len() {
                let end = self.c[self.i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.c.len(), |e| self.i + e);
                let body: String = self.c[self.i..end].iter().collect();
                self.i = (end + 1).min(self.c.len());
                let text = if strip {
                    body.trim_start_matches('\t')
                } else {
                    &body
                };
                if text == delimiter {
                    break;
                }
                if !quoted && ["$(", "${", "$[", "`"].iter().any(|x| body.contains(x)) {
                    self.unknown("<<".into());
                }
            }
        }
    }

    /// Adds a command the line does not show.
    fn unknown(&mut self, text: String) {
        let words = vec![Word {
            text,
            dynamic: true,
            ..Word::default()
        }];
        self.line.commands.push(Simple {
            words,
            redirected: false,
        });
    }

    /// `((…))` or `$[…]` from `self.i` (at the opening), skipped. It may evaluate
    /// the value of any variable it names as arithmetic, and an array subscript
    /// there runs its substitutions: unless it holds only numbers and operators it
    /// adds an unknown command. A `((` that is not arithmetic makes the line broken.
    fn arithmetic(&mut self, double: bool) {
        let (open, close) = if double { ('(', ')') } else { ('[', ']') };
        let start = self.i + if double { 2 } else { 1 };
        let mut j = start;
        let mut depth = 0usize;
        loop {
            match self.c.get(j) {
                None => {
                    self.i = j;
                    self.line.broken = true;
                    return;
                }
                Some(&c) if c == open => depth += 1,
                Some(&c) if c == close && depth > 0 => depth -= 1,
                Some(&c) if c == close => break,
                _ => {}
            }
            j += 1;
        }
        if double && self.c.get(j + 1) != Some(&')') {
            self.i = j;
            self.line.broken = true;
            return;
        }
        let text: String = self.c[start..j].iter().collect();
        self.i = j + if double { 2 } else { 1 };
        if !plain_arithmetic(&text) {
            self.unknown(format!("(({text}))"));
        }
    }

    fn word_char(&mut self, ch: char) {
        match ch {
            '\'' => self.single_quoted(),
            '"' => self.double_quoted(),
            '\\' => {
                self.i += 1;
                match self.peek(0) {
                    Some('\n') => self.i += 1,
                    Some(c) => {
                        self.quote();
                        self.word().text.push(c);
                        self.i += 1;
                    }
                    None => self.word().text.push('\\'),
                }
            }
            '$' => self.dollar(),
            '`' => {
                self.i += 1;
                self.substitution('`');
            }
            _ => {
                self.brace |= ch == '{';
                self.bracket |= ch == '[';
                let start = self.word.is_none();
                let w = self.word();
                if matches!(ch, '*' | '?') || (ch == '~' && start) {
                    w.dynamic = true;
                }
                w.text.push(ch);
                self.i += 1;
            }
        }
    }

    fn single_quoted(&mut self) {
        self.i += 1;
        self.quote();
        while let Some(ch) = self.peek(0) {
            self.i += 1;
            if ch == '\'' {
                return;
            }
            self.word().text.push(ch);
        }
        self.line.broken = true;
    }

    fn double_quoted(&mut self) {
        self.i += 1;
        self.quote();
        while let Some(ch) = self.peek(0) {
            match ch {
                '"' => {
                    self.i += 1;
                    return;
                }
                '\\' if matches!(self.peek(1), Some('$' | '`' | '"' | '\\' | '\n')) => {
                    let next = self.peek(1).unwrap_or('\\');
                    if next != '\n' {
                        self.word().text.push(next);
                    }
                    self.i += 2;
                }
                '$' => self.dollar(),
                '`' => {
                    self.i += 1;
                    self.substitution('`');
                }
                _ => {
                    self.word().text.push(ch);
                    self.i += 1;
                }
            }
            if self.line.broken {
                return;
            }
        }
        self.line.broken = true;
    }

    /// Marks the word quoted from here on.
    fn quote(&mut self) {
        let w = self.word();
        if !w.quoted {
            w.quoted = true;
            w.quote_at = Some(w.text.len());
        }
    }

    /// `$(…)`, `$((…))`, `$[…]`, `${…}`, `$'…'`, `$"…"`, `$NAME`, or a plain `$`.
    fn dollar(&mut self) {
        let next = self.peek(1);
        match next {
            Some('(') if self.peek(2) == Some('(') => {
                self.i += 1;
                self.arithmetic(true);
                self.dynamic_word();
            }
            Some('[') => {
                self.i += 1;
                self.arithmetic(false);
                self.dynamic_word();
            }
            Some('(') => {
                self.i += 2;
                self.substitution(')');
            }
            Some('{') => {
                self.i += 2;
                self.parameter();
            }
            Some('\'') => {
                self.i += 1;
                self.single_quoted();
                self.word().dynamic = true;
            }
            Some('"') => {
                self.i += 1;
                self.double_quoted();
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                self.i += 2;
                if c.is_ascii_alphabetic() || c == '_' {
                    while self
                        .peek(0)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.i += 1;
                    }
                }
                let w = self.word();
                w.dynamic = true;
                w.text.push('$');
            }
            _ => {
                self.word().text.push('$');
                self.i += 1;
            }
        }
    }

    fn dynamic_word(&mut self) {
        let w = self.word();
        w.dynamic = true;
        w.text.push('$');
        self.line.substituted = true;
    }

    /// The inside of `$(…)` or backticks, read as commands of their own; the word
    /// holding it is dynamic.
    fn substitution(&mut self, closer: char) {
        let w = self.word();
        w.dynamic = true;
        w.text.push('$');
        self.line.substituted = true;
        if self.depth >= MAX_DEPTH {
            self.line.broken = true;
            return;
        }
        let mut inner = Reader::new(self.c, self.depth + 1);
        inner.i = self.i;
        inner.run(Some(closer));
        self.i = inner.i;
        self.merge(inner.line);
    }

    /// `${…}`: dynamic; its text is read too, for the substitutions it may hold
    /// (at worst that finds a command that is not one).
    fn parameter(&mut self) {
        let w = self.word();
        w.dynamic = true;
        w.text.push('$');
        let start = self.i;
        let mut depth = 0usize;
        while let Some(ch) = self.peek(0) {
            self.i += 1;
            match ch {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    if self.depth >= MAX_DEPTH {
                        self.line.broken = true;
                        return;
                    }
                    let mut inner = Reader::new(&self.c[start..self.i - 1], self.depth + 1);
                    inner.run(None);
                    return self.merge(inner.line);
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        self.line.broken = true;
    }

    fn merge(&mut self, inner: Line) {
        self.line.broken |= inner.broken;
        self.line.substituted |= inner.substituted;
        self.line.commands.extend(inner.commands);
    }
}

/// Arithmetic that names no variable (numbers and operators only).
pub fn plain_arithmetic(s: &str) -> bool {
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .next_if(|c| c.is_ascii_alphanumeric() || *c == '#')
                .is_some()
            {}
        } else if !(c.is_whitespace() || "+-*/%<>=!&|^~?:,()".contains(c)) {
            return false;
        }
    }
    true
}
