//! A YAML stream read into nodes that know where they are in the text.
//!
//! Built from saphyr-parser's events and their spans, so that edits can
//! splice the text at exact byte ranges and leave everything else alone.
//! Offsets are bytes into the whole file; `end` is exclusive and is the end
//! of the node's last content (never trailing blank lines or comments).

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Span};

/// One node and its byte range.
#[derive(Debug, Clone)]
pub struct Node {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Scalar {
        value: String,
        style: ScalarStyle,
    },
    /// `close` is the byte of the closing `}` of a flow mapping.
    Map {
        entries: Vec<Entry>,
        close: Option<usize>,
    },
    /// `close` is the byte of the closing `]` of a flow sequence.
    Seq {
        items: Vec<Node>,
        close: Option<usize>,
    },
    Alias,
}

/// A mapping entry: its key (as text) and value.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: String,
    pub key_start: usize,
    /// The byte just after the `:` that ends the key.
    pub colon_end: usize,
    pub value: Node,
}

impl Node {
    /// Whether this is a null scalar (`~`, `null`, or nothing at all).
    pub fn is_null(&self) -> bool {
        matches!(&self.kind, Kind::Scalar { value, style: ScalarStyle::Plain }
            if matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// Whether the node is written in block style (block collections and
    /// `|`/`>` scalars): such nodes take lines of their own.
    pub fn is_block(&self) -> bool {
        match &self.kind {
            Kind::Map { close, .. } | Kind::Seq { items: _, close } => close.is_none(),
            Kind::Scalar { style, .. } => {
                matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
            }
            Kind::Alias => false,
        }
    }
}

/// The file's text with a line index.
pub struct Text<'a> {
    pub text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> Text<'a> {
    pub fn new(text: &'a str) -> Text<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        Text { text, line_starts }
    }

    /// The byte offset of a parser marker (1-based line, column in chars).
    fn offset(&self, marker: &Marker) -> usize {
        let Some(&start) = self.line_starts.get(marker.line().saturating_sub(1)) else {
            return self.text.len();
        };
        let line = &self.text[start..];
        start
            + line
                .char_indices()
                .nth(marker.col())
                .map_or(line.len(), |(at, _)| at)
    }

    /// The 0-based line holding byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|start| *start <= offset) - 1
    }

    /// 1-based line number of `offset`, for messages.
    pub fn line_number(&self, offset: usize) -> usize {
        self.line_of(offset) + 1
    }

    pub fn line_start(&self, line: usize) -> usize {
        self.line_starts
            .get(line)
            .copied()
            .unwrap_or(self.text.len())
    }

    /// The byte after the line's `\n` (or the end of the text).
    pub fn next_line_start(&self, line: usize) -> usize {
        self.line_start(line + 1)
    }

    /// The column of `offset` in its line, in bytes.
    pub fn column(&self, offset: usize) -> usize {
        offset - self.line_start(self.line_of(offset))
    }

    /// The text of line `line` without its line break.
    fn line(&self, line: usize) -> &'a str {
        let start = self.line_start(line);
        let end = self.line_start(line + 1).min(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }
}

/// Why a YAML text could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// The root node of every document of the stream, null documents included
/// (callers skip them the way `manifest.rs` does).
pub fn documents(text: &Text<'_>) -> Result<Vec<Node>, ParseError> {
    let mut events = Events {
        parser: Parser::new_from_str(text.text),
        peeked: None,
        text,
    };
    let mut roots = Vec::new();
    loop {
        let (event, _) = events.next()?;
        match event {
            Event::DocumentStart(_) => {
                roots.push(events.node()?);
                events.next()?;
            }
            Event::StreamEnd => return Ok(roots),
            _ => {}
        }
    }
}

struct Events<'t, 'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    peeked: Option<(Event<'a>, Span)>,
    text: &'t Text<'a>,
}

impl<'a> Events<'_, 'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), ParseError> {
        if let Some(peeked) = self.peeked.take() {
            return Ok(peeked);
        }
        match self.parser.next_event() {
            Some(Ok(event)) => Ok(event),
            Some(Err(error)) => Err(ParseError {
                line: error.marker().line(),
                message: error.info().to_string(),
            }),
            None => Ok((Event::StreamEnd, Span::default())),
        }
    }

    fn peek(&mut self) -> Result<&(Event<'a>, Span), ParseError> {
        if self.peeked.is_none() {
            self.peeked = Some(self.next()?);
        }
        Ok(self.peeked.as_ref().expect("just peeked"))
    }

    /// Reads a collection's children with `child` (each with where its
    /// content ends) up to the collection's end, and consumes the end.
    /// Returns the children, where the closing bracket is (flow style only)
    /// and where the collection ends.
    fn children<T>(
        &mut self,
        start: usize,
        flow: bool,
        mut child: impl FnMut(&mut Self) -> Result<(T, usize), ParseError>,
    ) -> Result<(Vec<T>, Option<usize>, usize), ParseError> {
        let mut children = Vec::new();
        let mut last = start;
        // A nested collection consumes its own end, so the next end seen
        // here is this collection's.
        while !matches!(self.peek()?.0, Event::MappingEnd | Event::SequenceEnd) {
            let (child, end) = child(self)?;
            last = last.max(end);
            children.push(child);
        }
        let (_, span) = self.next()?;
        let close = flow.then(|| self.text.offset(&span.start));
        Ok((children, close, close.map_or(last, |close| close + 1)))
    }

    /// A mapping entry, and where its content ends: its value's end, or
    /// the colon's for an empty value.
    fn entry(&mut self) -> Result<(Entry, usize), ParseError> {
        let key = self.node()?;
        let Kind::Scalar { value: name, .. } = key.kind else {
            return Err(ParseError {
                line: self.text.line_number(key.start),
                message: "only scalar mapping keys can be edited".into(),
            });
        };
        let colon_end = self.text.text[key.end..]
            .find(':')
            .map_or(key.end, |at| key.end + at + 1);
        let mut value = self.node()?;
        if value.end <= colon_end && value.is_null() {
            value.start = colon_end;
            value.end = colon_end;
        }
        let end = value.end.max(colon_end);
        let entry = Entry {
            key: name,
            key_start: key.start,
            colon_end,
            value,
        };
        Ok((entry, end))
    }

    fn node(&mut self) -> Result<Node, ParseError> {
        let (event, span) = self.next()?;
        let start = self.text.offset(&span.start);
        let end = self.text.offset(&span.end);
        let flow = end > start;
        match event {
            Event::Scalar(value, style, _, _) => {
                let end = match style {
                    ScalarStyle::Literal | ScalarStyle::Folded => self.block_scalar_end(start, end),
                    _ => end,
                };
                Ok(Node {
                    kind: Kind::Scalar {
                        value: value.into_owned(),
                        style,
                    },
                    start,
                    end,
                })
            }
            Event::MappingStart(..) => {
                let (entries, close, end) = self.children(start, flow, Self::entry)?;
                let kind = Kind::Map { entries, close };
                Ok(Node { kind, start, end })
            }
            Event::SequenceStart(..) => {
                let (items, close, end) = self.children(start, flow, |events| {
                    let item = events.node()?;
                    let end = item.end;
                    Ok((item, end))
                })?;
                let kind = Kind::Seq { items, close };
                Ok(Node { kind, start, end })
            }
            Event::Alias(_) => Ok(Node {
                kind: Kind::Alias,
                start,
                end,
            }),
            other => Err(ParseError {
                line: span.start.line(),
                message: format!("unexpected {other:?}"),
            }),
        }
    }

    /// The end of a `|` or `>` scalar's last content line: the parser's span
    /// runs on over trailing blank lines up to the next token.
    fn block_scalar_end(&self, start: usize, end: usize) -> usize {
        let indent = self.text.column(start);
        let first = self.text.line_of(start);
        let last = self.text.line_of(end.max(start));
        (first..=last)
            .rev()
            .find(|line| {
                let text = self.text.line(*line);
                let content = text.trim_start();
                !content.is_empty()
                    && text.len() - content.len() >= indent
                    && self.text.line_start(*line) < end
            })
            .map_or(end, |line| {
                self.text.line_start(line) + self.text.line(line).len()
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_span_their_text_and_block_scalars_end_at_their_last_line() {
        let source = "a: 1\nb:\n  c: |\n    x\n    y\n\n  d: [1, 'two']\ne:\n";
        let text = Text::new(source);
        let roots = documents(&text).unwrap();
        let Kind::Map { entries, .. } = &roots[0].kind else {
            panic!()
        };
        assert_eq!(&source[entries[0].value.start..entries[0].value.end], "1");
        let Kind::Map { entries: inner, .. } = &entries[1].value.kind else {
            panic!()
        };
        let c = &inner[0].value;
        assert_eq!(&source[c.start..c.end], "x\n    y");
        let d = &inner[1].value;
        assert_eq!(&source[d.start..d.end], "[1, 'two']");
        assert_eq!(
            &source[entries[1].value.start..entries[1].value.end],
            "c: |\n    x\n    y\n\n  d: [1, 'two']"
        );
        assert!(entries[2].value.is_null());
        assert_eq!(entries[2].value.start, source.len() - 1);
    }
}
