//! Delimited records: how a line of CSV/TSV becomes its key bytes.
//!
//! RFC 4180 quoting: a field that starts with `"` runs to the matching closing quote, `""` inside it
//! stands for one `"`, and the key is the field's unquoted content, so `"42"` and `42` are the same
//! key. Lines end with LF or CRLF (a file whose lines end in CR alone is read with each CR made an
//! LF: [`crate::splits::LineEnds`]). The hot path (a line without quotes) is a few `memchr` calls and
//! never allocates; a quoted key is unescaped into a buffer the caller reuses.

use crate::error::{Error, Result};

/// The shape of the input: delimiter and whether the first line of each file is a header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordFormat {
    pub delimiter: u8,
    pub has_header: bool,
    /// Quoted fields may hold line breaks (`--multiline`, Spark's `multiLine`): a record then
    /// ends at the first newline outside quotes, and a plain file's splits start at records'
    /// starts (`splits::align_to_records`). Otherwise every line is a record.
    pub multiline: bool,
}

/// The end (just past its newline) of each record of `bytes`, which start at a record's start,
/// where a quoted field may hold newlines: a newline ends a record unless it is inside a field
/// that opens with a quote at its start, up to that field's closing quote (`""` inside it is an
/// escaped quote). A quote inside an unquoted field is a plain byte, as the record parser reads
/// it. The last record, if it runs past the end of `bytes`, is not given.
pub fn record_ends(bytes: &[u8], delimiter: u8) -> impl Iterator<Item = usize> + '_ {
    // Only quotes and newlines matter: a quote opens a field where it follows the start, a
    // delimiter or a newline (outside quotes every newline ends a record). Lines without
    // quotes are then one `memchr2` each, where stopping at every delimiter took twice the
    // time of the scan itself.
    let mut at = 0;
    std::iter::from_fn(move || loop {
        let found = at + memchr::memchr2(b'"', b'\n', &bytes[at..])?;
        at = found + 1;
        if bytes[found] == b'\n' {
            return Some(at);
        }
        if found == 0 || bytes[found - 1] == delimiter || bytes[found - 1] == b'\n' {
            at = quoted_field_end(bytes, at)?;
        }
    })
}

/// Just past the closing quote of the quoted field that `bytes` is inside from `at` (`""` is an
/// escaped quote). None if it does not close within `bytes`: a quote that is the last byte may
/// be the first of an escaped pair whose second is not read yet.
pub(crate) fn quoted_field_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let quote = at + memchr::memchr(b'"', &bytes[at..])?;
        match bytes.get(quote + 1) {
            Some(b'"') => at = quote + 2,
            Some(_) => return Some(quote + 1),
            None => return None,
        }
    }
}

/// Where a record certainly starts in `bytes`, which begin just past a newline somewhere in a
/// text whose quoted fields may hold newlines (`--multiline`) and whose records are at most
/// `max_record` bytes: the first offset that is a record's end whether that newline ended a
/// record or lay inside a quoted field. These are the only two states a reader can be in just
/// past a newline, and from a record's end both read the same records, so a split may start
/// there without reading the text before it. None if `bytes` hold no such offset: where the
/// two readings stay out of step (a text whose quoted fields look like records themselves), or
/// no quote comes to tell them apart.
///
/// Usually the two agree within a record: the quote that a record start would open is, read
/// from inside a field, the one that closes it, and the rest of the line reads the same. And a
/// field still open `max_record` bytes on would make its record longer than the limit, an error
/// however the text is cut: where no quote comes that soon, the newline ended a record.
pub fn certain_record_start(bytes: &[u8], delimiter: u8, max_record: usize) -> Option<usize> {
    let converged = || {
        let mut from_start = record_ends(bytes, delimiter);
        let closed = quoted_field_end(bytes, 0)?;
        // The byte past a closing quote is no quote (the two would be an escaped one), so
        // reading on from it is reading on in the middle of a record.
        let mut from_inside = record_ends(&bytes[closed..], delimiter).map(|end| closed + end);
        let (mut a, mut b) = (from_start.next()?, from_inside.next()?);
        loop {
            match a.cmp(&b) {
                std::cmp::Ordering::Equal => return Some(a),
                std::cmp::Ordering::Less => a = from_start.next()?,
                std::cmp::Ordering::Greater => b = from_inside.next()?,
            }
        }
    };
    converged().or_else(|| {
        let no_field_open = bytes.len() >= max_record && memchr::memchr(b'"', &bytes[..max_record]).is_none();
        no_field_open.then(|| memchr::memchr(b'\n', &bytes[..max_record]).map(|i| i + 1)).flatten()
    })
}

/// The end of the last whole record of `bytes` (see [`record_ends`]). The lines before the
/// first quote's are records one each, found from the end: a buffer without quotes is one
/// `memrchr`, where cutting it record by record took a fifth of a build's time.
pub fn last_record_end(bytes: &[u8], delimiter: u8) -> Option<usize> {
    last_record_end_past(bytes, delimiter, memchr::memchr(b'"', bytes))
}

/// [`last_record_end`] of `bytes` whose first quote is at `first_quote`, found already.
fn last_record_end_past(bytes: &[u8], delimiter: u8, first_quote: Option<usize>) -> Option<usize> {
    let Some(quote) = first_quote else {
        return memchr::memrchr(b'\n', bytes).map(|i| i + 1);
    };
    let line_start = memchr::memrchr(b'\n', &bytes[..quote]).map_or(0, |i| i + 1);
    record_ends(&bytes[line_start..], delimiter).last().map(|end| line_start + end).or((line_start > 0).then_some(line_start))
}

/// The end of a whole record of `bytes` (which start at a record's start) near their end, for a
/// reader that hands on the records before it: the last record end ([`last_record_end`]), or
/// where quotes come early, a record end in the last few KiB that is certain whatever state the
/// text is in there ([`certain_record_start`]). That spares cutting every quoted record twice,
/// here and in the scan: 83 million of the 633 million instructions of a build of 300,000
/// records with a quoted field each.
pub fn late_record_end(bytes: &[u8], delimiter: u8) -> Option<usize> {
    record_end_in_tail(bytes, delimiter, 4096)
}

/// [`late_record_end`], looking in the last `tail` bytes first.
fn record_end_in_tail(bytes: &[u8], delimiter: u8, tail: usize) -> Option<usize> {
    let quote = memchr::memchr(b'"', bytes);
    if quote.is_some_and(|quote| bytes.len() - quote > 4 * tail) {
        let from = bytes.len() - tail;
        let past = memchr::memchr(b'\n', &bytes[from..]).map(|i| from + i + 1);
        if let Some(start) = past.and_then(|past| certain_record_start(&bytes[past..], delimiter, usize::MAX).map(|start| past + start)) {
            return Some(start);
        }
    }
    // (Looking for the first quote again made two passes over a buffer without one.)
    last_record_end_past(bytes, delimiter, quote)
}

/// Which field holds the key, as the user named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyField {
    /// A column name from the header.
    Name(String),
    /// A 1-based field index.
    Index(usize),
}

impl KeyField {
    /// Reads `--key FIELD`: a positive integer is an index, anything else a name.
    pub fn parse(text: &str, has_header: bool) -> Result<KeyField> {
        match text.parse::<usize>() {
            Ok(0) => Err(Error::invalid("key", "field indexes are 1-based; 0 is not a field")),
            Ok(i) => Ok(KeyField::Index(i)),
            Err(_) if has_header => Ok(KeyField::Name(text.to_string())),
            Err(_) => Err(Error::invalid(
                "key",
                format!("{text:?} is not a 1-based field index (with --no-header the key must be a number)"),
            )),
        }
    }

    /// The 0-based index of this field given a header line (for names).
    pub fn resolve(&self, header: Option<&[u8]>, delimiter: u8, file: &str) -> Result<usize> {
        self.resolve_among(header_fields(header, delimiter, file)?.as_deref(), file)
    }

    /// [`resolve`](Self::resolve) given the header's fields, split once for all of a key's.
    fn resolve_among(&self, header: Option<&[Vec<u8>]>, file: &str) -> Result<usize> {
        match (self, header) {
            (KeyField::Index(i), Some(fields)) => {
                if *i > fields.len() {
                    return Err(Error::invalid(
                        "key",
                        format!("{file}: field {i} is past the last field of the header, which has {}{}", fields.len(), delimiter_hint(fields)),
                    ));
                }
                Ok(i - 1)
            }
            (KeyField::Index(i), None) => Ok(i - 1),
            (KeyField::Name(name), Some(fields)) => {
                // 1-based positions of the columns of that name: one, or the key is ambiguous
                // (as Spark and DuckDB find it), and guessing would join on the wrong column.
                let at: Vec<usize> = (1..=fields.len()).filter(|&i| fields[i - 1] == name.as_bytes()).collect();
                match at[..] {
                    [i] => Ok(i - 1),
                    [] => {
                        let names: Vec<String> = fields.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect();
                        let case = fields.iter().find(|f| f.eq_ignore_ascii_case(name.as_bytes())).map_or(String::new(), |f| {
                            format!("; {:?} differs only in case (names are matched exactly)", String::from_utf8_lossy(f))
                        });
                        Err(Error::invalid(
                            "key",
                            format!("{file}: no column named {name:?} in the header (columns: {}){case}{}", names.join(", "), delimiter_hint(fields)),
                        ))
                    }
                    _ => {
                        let at: Vec<String> = at.iter().map(usize::to_string).collect();
                        Err(Error::invalid(
                            "key",
                            format!("{file}: the header names fields {} {name:?}: give the key by its 1-based index instead", at.join(" and ")),
                        ))
                    }
                }
            }
            (KeyField::Name(name), None) => Err(Error::invalid(
                "key",
                format!("{file}: key column {name:?} needs a header, but the file is empty"),
            )),
        }
    }
}

/// The unquoted fields of a header line (`None` without one); a header that cannot be split is
/// line 1 of `file`, malformed.
fn header_fields(header: Option<&[u8]>, delimiter: u8, file: &str) -> Result<Option<Vec<Vec<u8>>>> {
    let Some(line) = header else { return Ok(None) };
    let mut scratch = Vec::new();
    split_fields(trim_line_end(line), delimiter, &mut scratch).map(Some).map_err(|reason| Error::Malformed { path: file.to_string(), line: 1, reason })
}

/// The key of a record as the user named it: one field, or several whose values together make
/// one composite key (a join on several columns, as Spark's `join(other, Seq("a", "b"))`).
///
/// A composite key is hashed (and joined) as its fields' values in order, each preceded by its
/// length as a LEB128 varint ([`push_with_length`]), so that ("ab", "c") and ("a", "bc")
/// differ. A one-field key is its value alone, as before composite keys existed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    fields: Vec<KeyField>,
}

impl Key {
    /// A key of one field.
    pub fn single(field: KeyField) -> Key {
        Key { fields: vec![field] }
    }

    /// A key of the fields `texts` (each as [`KeyField::parse`] reads it), in order.
    pub fn parse<S: AsRef<str>>(texts: &[S], has_header: bool) -> Result<Key> {
        if texts.is_empty() {
            return Err(Error::invalid("key", "no key field given"));
        }
        let fields = texts.iter().map(|t| KeyField::parse(t.as_ref(), has_header)).collect::<Result<Vec<_>>>()?;
        Ok(Key { fields })
    }

    /// Whether the key has several fields.
    pub fn is_composite(&self) -> bool {
        self.fields.len() > 1
    }

    /// How many fields make the key (at least one).
    pub fn field_count(&self) -> usize {
        self.fields.len()
    }

    /// The 0-based index of every field, given a header line (for names). A field named twice
    /// is refused: it is a mistake, and the key would not join with the other side's.
    pub fn resolve(&self, header: Option<&[u8]>, delimiter: u8, file: &str) -> Result<Vec<usize>> {
        let fields = header_fields(header, delimiter, file)?;
        let indexes = self.fields.iter().map(|f| f.resolve_among(fields.as_deref(), file)).collect::<Result<Vec<usize>>>()?;
        for (i, index) in indexes.iter().enumerate() {
            if indexes[..i].contains(index) {
                return Err(Error::invalid("key", format!("{file}: field {} is named twice in the key", index + 1)));
            }
        }
        Ok(indexes)
    }

    /// The indexes, when every field is given by index (no header needed).
    pub fn indexes(&self) -> Option<Vec<usize>> {
        self.fields.iter().map(|f| match f {
            KeyField::Index(i) => Some(i - 1),
            KeyField::Name(_) => None,
        }).collect()
    }

    /// Whether any field is given by name.
    pub fn has_names(&self) -> bool {
        self.fields.iter().any(|f| matches!(f, KeyField::Name(_)))
    }
}

/// A hint for a key that the header does not have, when the header is one field holding a
/// common delimiter: the file's delimiter is not the one given (a TSV read with the default
/// `,`, say), which is the usual cause.
fn delimiter_hint(fields: &[Vec<u8>]) -> String {
    let [only] = fields else { return String::new() };
    match [b',', b'\t', b';', b'|'].into_iter().find(|d| only.contains(d)) {
        Some(d) => format!("; the header is one field that holds {:?}: is the delimiter right?", d as char),
        None => String::new(),
    }
}

/// Appends `bytes` to `out` after its length as a LEB128 varint (one byte below 128): how a
/// composite key holds each field, and how the exact join's key arena holds each key.
#[inline]
pub fn push_with_length(out: &mut Vec<u8>, bytes: &[u8]) {
    push_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends `value` as a LEB128 varint: 7 bits a byte, low first, the high bit set on every
/// byte but the last.
#[inline]
pub fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The composite key of `line` (terminator trimmed) of the fields at `indexes` into `out`: the
/// fields' values, unquoted (`quoted`: the line may hold quotes), each after its length. A
/// field that cannot be read is an error, with its index. Returns whether the key has a value:
/// `false` when a field is written as `null` (see [`key_or_null`]), as SQL's `(a, b) = (c, d)`
/// is not true when any side is NULL; `out` is then not a key.
pub fn composite_key(
    line: &[u8],
    delimiter: u8,
    indexes: &[usize],
    quoted: bool,
    null: Option<&[u8]>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<bool, (usize, KeyError)> {
    out.clear();
    if !quoted || memchr::memchr(b'"', line).is_none() {
        if let Some(present) = unquoted_composite_key(line, delimiter, indexes, null, out) {
            return present;
        }
    }
    let mut present = true;
    for &index in indexes {
        // Every field is read, past a NULL too: a record without one is malformed all the same.
        push_field(out, key_or_null(line, delimiter, index, quoted, null, scratch).map_err(|e| (index, e))?, &mut present);
    }
    Ok(present)
}

/// The most fields [`unquoted_composite_key`] walks a line for: a key of a later field (a
/// header of that many columns is rare, a key past it rarer) takes [`composite_key`]'s
/// field-by-field reading.
const MOST_WALKED: usize = 4096;

/// The fields whose starts a walk keeps on the stack ([`with_field_starts`]): up to the 16th
/// (most keys) in an array of that size, up to the 64th in a larger one.
const FEW_FIELDS: usize = 16;
const MOST_ON_STACK: usize = 64;

/// Room for the starts of fields 0..=`most`, handed to `walk`: on the stack up to
/// [`MOST_ON_STACK`], else in a vector made for the call. The array is set to zero for every
/// record, so keys of the first [`FEW_FIELDS`] fields get a small one: an array of 64 starts for
/// every key was a call to `memset` a record. A key of later fields was read field by field
/// until the thirty-ninth round: a `-w 1` build keyed on the 19th and 21st of 24 fields took
/// 0.45–0.56 s for 4M rows so (0.21–0.23 s keyed on the 3rd and 6th), 0.37–0.39 s walked once
/// with the starts in a vector, 0.29–0.30 s with them on the stack.
#[inline(always)]
fn with_field_starts<R>(most: usize, walk: impl FnOnce(&mut [usize]) -> R) -> R {
    if most <= FEW_FIELDS {
        walk(&mut [0; FEW_FIELDS + 1][..most + 1])
    } else if most <= MOST_ON_STACK {
        walk(&mut [0; MOST_ON_STACK + 1][..most + 1])
    } else {
        walk(&mut vec![0; most + 1])
    }
}

/// [`composite_key`] of a line without quotes, appended to `out`, its fields found in one walk of
/// the line up to the last one asked for; None where that is past [`MOST_WALKED`]. Asking for
/// each field in turn walked the line again for every field: a `-w 1` build of the probe keyed
/// on `payload,customer_id` took 1.44–1.57 s so, 1.34–1.36 s in one walk (0.63 s keyed on
/// `payload` alone, which takes the scan's fast path).
pub(crate) fn unquoted_composite_key(line: &[u8], delimiter: u8, indexes: &[usize], null: Option<&[u8]>, out: &mut Vec<u8>) -> Option<Result<bool, (usize, KeyError)>> {
    let last = *indexes.iter().max()?;
    if last >= MOST_WALKED {
        return None;
    }
    with_field_starts(last + 1, |starts| {
        let fields = field_starts(line, delimiter, last + 1, starts);
        Some(push_walked_fields(line, &starts[..fields], indexes, null, |field| (field, false), out))
    })
}

/// [`composite_key`] of a line whose quoted fields are whole fields, as
/// [`simply_quoted_field_within`] reads one field of it (`room` and `len` as there), appended
/// to `out`, the fields found in one walk of the whole line, as [`unquoted_composite_key`]
/// finds them; None for a line without quotes, one whose quotes are not so, or a key of a
/// field past [`MOST_WALKED`].
pub(crate) fn simply_quoted_composite_key(room: &[u8], len: usize, delimiter: u8, indexes: &[usize], null: Option<&[u8]>, out: &mut Vec<u8>) -> Option<Result<bool, (usize, KeyError)>> {
    let last = *indexes.iter().max()?;
    if last >= MOST_WALKED {
        return None;
    }
    with_field_starts(last + 1, |starts| {
        let mut fields = 1;
        let quotes = walk_simply_quoted(room, len, delimiter, |mask, base| {
            record_field_starts(mask, base, last + 1, starts, &mut fields);
        })?;
        let (line, starts) = (&room[..len], &starts[..fields]);
        let escaped_key = || indexes.iter().any(|&index| index < fields && holds_quote(unquote_whole(walked_field(line, starts, index)).0));
        if !quotes.any || (quotes.escaped && escaped_key()) {
            return None;
        }
        Some(push_walked_fields(line, starts, indexes, null, unquote_whole, out))
    })
}

/// Appends to `out` the fields at `indexes` of `line`, whose fields start at `starts` (all of
/// them, or those up to the last of `indexes`), each as `read` takes it from its bytes (with
/// whether it was in quotes); whether none is NULL, or the first missing field.
#[inline(always)]
fn push_walked_fields<'a>(line: &'a [u8], starts: &[usize], indexes: &[usize], null: Option<&[u8]>, read: impl Fn(&'a [u8]) -> (&'a [u8], bool), out: &mut Vec<u8>) -> Result<bool, (usize, KeyError)> {
    let fields = starts.len();
    let mut present = true;
    for &index in indexes {
        if index >= fields {
            return Err((index, KeyError::MissingField { fields }));
        }
        let (field, in_quotes) = read(walked_field(line, starts, index));
        push_field(out, null_unless_quoted(field, in_quotes, null), &mut present);
    }
    Ok(present)
}

/// Field `index` of `line`, whose fields start at `starts` (as for [`push_walked_fields`]; the
/// field must be one of them).
#[inline(always)]
fn walked_field<'a>(line: &'a [u8], starts: &[usize], index: usize) -> &'a [u8] {
    let end = if index + 1 < starts.len() { starts[index + 1] - 1 } else { line.len() };
    &line[starts[index]..end]
}

/// Records the delimiters of `mask` (bits from `base`) as the starts of the fields after them,
/// into `starts[*fields..=most]`; whether all fields up to `most` are found.
#[inline(always)]
fn record_field_starts(mut mask: u32, base: usize, most: usize, starts: &mut [usize], fields: &mut usize) -> bool {
    while mask != 0 && *fields <= most {
        starts[*fields] = base + mask.trailing_zeros() as usize + 1;
        *fields += 1;
        mask &= mask - 1;
    }
    *fields > most
}

/// Where fields 0..=`most` of an unquoted `line` start, into `starts` (which must hold
/// `most + 1`), 32 bytes of the line at a time; returns how many of them the line has (all
/// `most + 1`, or fewer: then the line's fields).
#[inline]
fn field_starts(line: &[u8], delimiter: u8, most: usize, starts: &mut [usize]) -> usize {
    let mut fields = 1;
    let mut record = |mask: u32, base: usize, fields: &mut usize| record_field_starts(mask, base, most, starts, fields);
    let mut window = 0;
    while window + 32 <= line.len() {
        if record(crate::bytemask::mask32(line[window..window + 32].try_into().expect("32 bytes"), delimiter), window, &mut fields) {
            return fields;
        }
        window += 32;
    }
    if window < line.len() {
        if line.len() >= 32 {
            // The line's last 32 bytes, those looked at already masked off.
            let base = line.len() - 32;
            record(crate::bytemask::mask32(line[base..].try_into().expect("32 bytes"), delimiter) & (u32::MAX << (window - base)), base, &mut fields);
        } else {
            record(short_line_mask(&line[window..], delimiter), window, &mut fields);
        }
    }
    fields
}

/// Appends one field of a composite key, length-prefixed, or notes that it is NULL.
#[inline]
fn push_field(out: &mut Vec<u8>, field: Option<&[u8]>, present: &mut bool) {
    match field {
        Some(value) => push_with_length(out, value),
        None => *present = false,
    }
}

/// Every field of `line` encoded as [`composite_key`] encodes the fields it is given (CSV
/// quoting applies; NULLs included), with how many fields there are and whether none is NULL:
/// a composite key written whole, as `query --composite` reads one. One walk over the fields
/// (asking [`key_or_null`] for each in turn took n² steps for n fields).
pub fn composite_key_of_every_field(line: &[u8], delimiter: u8, null: Option<&[u8]>, scratch: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<(usize, bool), (usize, KeyError)> {
    out.clear();
    let mut present = true;
    let fields = walk_fields(line, delimiter, scratch, |field, in_quotes| {
        push_field(out, null_unless_quoted(field, in_quotes, null), &mut present)
    })?;
    Ok((fields, present))
}

/// Field `index` of `line` (terminator trimmed) as [`extract_key`] reads it (`quoted`: the line
/// may hold quotes), or `None` where it is written as the text `null` stands for: SQL's NULL, as
/// `--null-key` names it (Hive writes `\N`; Spark, DuckDB and Polars read an empty unquoted
/// field as NULL). Only an unquoted field is NULL: `"\N"` and `""` are text.
#[inline]
pub fn key_or_null<'a>(line: &'a [u8], delimiter: u8, index: usize, quoted: bool, null: Option<&[u8]>, scratch: &'a mut Vec<u8>) -> Result<Option<&'a [u8]>, KeyError> {
    if !quoted || memchr::memchr(b'"', line).is_none() {
        let field = unquoted_field(line, delimiter, index)?;
        return Ok(null_unless_quoted(field, false, null));
    }
    let (field, in_quotes) = quoted_field(line, delimiter, index, scratch)?;
    Ok(null_unless_quoted(field, in_quotes, null))
}

/// `None` (NULL) for a field written unquoted as the text `null` stands for, else the field.
#[inline]
fn null_unless_quoted<'a>(field: &'a [u8], in_quotes: bool, null: Option<&[u8]>) -> Option<&'a [u8]> {
    (in_quotes || null != Some(field)).then_some(field)
}

/// How key text becomes the bytes that are hashed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyType {
    /// The key's exact bytes (Spark's `putString`/`putBinary`, Hadoop's `Key(bytes)`).
    #[default]
    Bytes,
    /// A signed 64-bit decimal, hashed as Spark's `putLong` (its 8 little-endian bytes).
    Long,
    /// The key's bytes as Hadoop's `Text` writes itself: the length as a Hadoop vint, then the
    /// bytes. A `BloomMapFile` hashes each key as its `Writable` serializes it, so this is how
    /// the `bloom` file of a map file of `Text` keys holds them.
    Text,
    /// A signed 64-bit decimal as Hadoop's `LongWritable` writes itself: 8 big-endian bytes.
    LongWritable,
    /// A signed 32-bit decimal as Hadoop's `IntWritable` writes itself: 4 big-endian bytes.
    IntWritable,
    /// The key's bytes as Hadoop's `BytesWritable` writes itself: the length as a big-endian
    /// int, then the bytes.
    BytesWritable,
}

impl KeyType {
    /// Whether the type is a Hadoop `Writable`'s serialization (what a `BloomMapFile` hashes).
    pub fn is_writable(self) -> bool {
        matches!(self, KeyType::Text | KeyType::LongWritable | KeyType::IntWritable | KeyType::BytesWritable)
    }
}

/// How a filter's keys were made into the bytes it hashed: how many fields (a composite key's
/// fields are hashed length-prefixed, see [`push_with_length`]) and of which type. Recorded in
/// native filter files so that a query or a join encodes its keys alike: a composite filter
/// asked about a plain key, or a `long` filter about a key's text, answers "no" for every key,
/// which would otherwise be silent data loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyForm {
    pub fields: u32,
    pub key_type: KeyType,
}

impl KeyForm {
    /// The form of keys made of `key`'s fields under `rules`.
    pub fn of(key: &Key, rules: &KeyRules) -> KeyForm {
        KeyForm { fields: key.field_count() as u32, key_type: rules.key_type }
    }

    /// Refuses keys of `fields` fields and type `key_type` for a filter of this form, saying
    /// what `user` (the command or job) must change.
    pub fn check(&self, fields: usize, key_type: KeyType, user: &str) -> Result<()> {
        let asked = KeyForm { fields: fields as u32, key_type };
        if asked == *self {
            return Ok(());
        }
        Err(Error::KeyMismatch { filter: *self, asked, user: user.to_string() })
    }
}

/// The type as `--key-type` names it.
impl std::fmt::Display for KeyType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeyType::Bytes => "bytes",
            KeyType::Long => "long",
            KeyType::Text => "text",
            KeyType::LongWritable => "long-writable",
            KeyType::IntWritable => "int-writable",
            KeyType::BytesWritable => "bytes-writable",
        })
    }
}

impl std::fmt::Display for KeyForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = self.key_type;
        match self.fields {
            1 => write!(f, "1 field ({kind})"),
            n => write!(f, "{n} fields (a composite key, {kind})"),
        }
    }
}

/// What a key must be before it is hashed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyRules {
    pub key_type: KeyType,
    /// Hadoop refuses empty keys.
    pub reject_empty: bool,
}

impl KeyRules {
    /// The bytes to hash for `key`: the key itself, or its encoding under the key type in
    /// `buf`. Called once per record: the usual byte keys inline, the others out of line.
    #[inline(always)]
    pub fn encode<'a>(&self, key: &'a [u8], buf: &'a mut Vec<u8>) -> Result<&'a [u8], KeyError> {
        let encoded = match self.key_type {
            KeyType::Bytes => key,
            key_type => encode_typed(key, key_type, buf)?,
        };
        // Hadoop refuses an empty key, but not an empty `Text`, whose length byte is hashed.
        if self.reject_empty && encoded.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(encoded)
    }
}

/// A key of a type other than bytes, encoded into `buf`.
#[inline(never)]
fn encode_typed<'a>(key: &[u8], key_type: KeyType, buf: &'a mut Vec<u8>) -> Result<&'a [u8], KeyError> {
    buf.clear();
    match key_type {
        KeyType::Bytes => buf.extend_from_slice(key),
        KeyType::Long => buf.extend_from_slice(&parse_number::<i64>(key, key_type)?.to_le_bytes()),
        KeyType::LongWritable => buf.extend_from_slice(&parse_number::<i64>(key, key_type)?.to_be_bytes()),
        KeyType::IntWritable => buf.extend_from_slice(&parse_number::<i32>(key, key_type)?.to_be_bytes()),
        KeyType::Text => {
            push_hadoop_vint(key.len() as i64, buf);
            buf.extend_from_slice(key);
        }
        KeyType::BytesWritable => {
            // A field longer than an int's range is no Hadoop key; no line is that long here.
            buf.extend_from_slice(&(key.len() as i32).to_be_bytes());
            buf.extend_from_slice(key);
        }
    }
    Ok(&buf[..])
}

/// The signed decimal `key` as a number of the key type's width.
fn parse_number<T: TryFrom<i64>>(key: &[u8], key_type: KeyType) -> Result<T, KeyError> {
    parse_i64(key)
        .and_then(|value| T::try_from(value).ok())
        .ok_or_else(|| KeyError::NotANumber { key: String::from_utf8_lossy(key).into_owned(), key_type })
}

/// `key` as `str::parse::<i64>` reads it: a sign (`+` or `-`) or none, then one or more ASCII
/// digits, within the type's range; None for anything else. By hand, since checking the bytes
/// as UTF-8 and then parsing the text took a sixth of a build keyed on numbers (as Spark's
/// `putLong` hashes them).
#[inline]
fn parse_i64(key: &[u8]) -> Option<i64> {
    let (negative, digits) = match key.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, key),
    };
    if digits.is_empty() {
        return None;
    }
    // Summed below zero, whose range reaches one further than above it (i64::MIN has no
    // positive counterpart).
    let mut value = 0i64;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(digit as i64)?;
    }
    if negative { Some(value) } else { value.checked_neg() }
}

/// Appends `value` as Hadoop's `WritableUtils.writeVLong` writes it (and `writeVInt`, which is
/// the same for an int): -112..=127 as one byte; otherwise a byte that gives the sign and the
/// number of bytes that follow (-113 to -120 for 1 to 8 positive bytes, -121 to -128 for a
/// negative value's one's complement), then those bytes, big-endian.
pub fn push_hadoop_vint(value: i64, out: &mut Vec<u8>) {
    if (-112..=127).contains(&value) {
        out.push(value as u8);
        return;
    }
    let (magnitude, first) = if value < 0 { (!value, -120i32) } else { (value, -112i32) };
    let bytes = 8 - (magnitude.leading_zeros() / 8) as usize;
    out.push((first - bytes as i32) as u8);
    out.extend_from_slice(&magnitude.to_be_bytes()[8 - bytes..]);
}

/// Drops a trailing LF and a CR before it. Written with indexes: with `strip_suffix` twice, the
/// build of the 2M-row probe ran 9 more instructions per record (675 against 657 million,
/// callgrind).
#[inline]
pub fn trim_line_end(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    if end > 0 && line[end - 1] == b'\n' {
        end -= 1;
    }
    if end > 0 && line[end - 1] == b'\r' {
        end -= 1;
    }
    &line[..end]
}

/// The UTF-8 byte order mark, which Excel, PowerShell and other Windows tools write at the
/// start of a text file.
pub const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The bytes of a UTF-8 byte order mark at the start of `line`: 3 or 0. Hadoop's
/// LineRecordReader drops a mark at the start of every file, and so do the jobs: kept, it
/// would be part of the first record's first field (or of the header's first name), and that
/// key would match nothing.
#[inline]
pub fn bom_len(line: &[u8]) -> usize {
    if line.starts_with(UTF8_BOM) { UTF8_BOM.len() } else { 0 }
}

/// Why a line yields no key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The line has fewer fields than the key's index: a malformed record.
    MissingField { fields: usize },
    /// A quote is opened and never closed on this line: either broken input or a quoted field
    /// with an embedded newline, which cannot be split safely.
    UnclosedQuote,
    /// Text after a closing quote and before the delimiter.
    StrayQuote,
    /// `--key-type long`, `long-writable` or `int-writable`, and the key is not a signed decimal
    /// integer of the type's width.
    NotANumber { key: String, key_type: KeyType },
    /// An empty key, which Hadoop filters refuse.
    Empty,
}

impl KeyError {
    /// A sentence for error messages.
    pub fn describe(&self, key_index: usize) -> String {
        match self {
            KeyError::MissingField { fields } => format!(
                "record has {fields} field(s), but the key is field {}",
                key_index + 1
            ),
            KeyError::UnclosedQuote => "unclosed quote: a quoted field is not closed before the record's end (its line's end; \
                 with --multiline, which reads quoted fields that hold line breaks, the input's end)"
                .into(),
            KeyError::StrayQuote => "characters after a closing quote (expected a delimiter or the end of the line)".into(),
            KeyError::NotANumber { key, key_type } => {
                let bits = if *key_type == KeyType::IntWritable { 32 } else { 64 };
                format!("key {key:?} is not a signed {bits}-bit decimal integer (--key-type {key_type})")
            }
            KeyError::Empty => "empty key: Hadoop filters refuse empty keys (key length must be > 0)".into(),
        }
    }

    /// True for errors that make the rest of the input untrustworthy, so that they always stop
    /// the job rather than being counted.
    pub fn is_fatal(&self) -> bool {
        matches!(self, KeyError::UnclosedQuote)
    }
}

/// Finds the key (field `index`, 0-based) of `line` (terminator already trimmed). Returns the
/// key bytes, borrowed from `line` or unescaped into `scratch`.
#[inline]
pub fn extract_key<'a>(line: &'a [u8], delimiter: u8, index: usize, scratch: &'a mut Vec<u8>) -> Result<&'a [u8], KeyError> {
    if memchr::memchr(b'"', line).is_none() {
        return unquoted_field(line, delimiter, index);
    }
    quoted_field(line, delimiter, index, scratch).map(|(field, _)| field)
}

/// The fast path: no quotes anywhere in the line (the caller knows). Delimiters are found 32
/// bytes at a time as a bitmask (keys are usually among the first fields, a few bytes away, where
/// a byte loop mispredicts and memchr's setup costs more than the search). Always inlined: as a
/// call it took 64 instructions per line of the benchmark's probe, and inlining it saved 25 per
/// line (callgrind: the build of the 2M-row probe, 805 → 755 million).
#[inline(always)]
pub fn unquoted_field(line: &[u8], delimiter: u8, index: usize) -> Result<&[u8], KeyError> {
    unquoted_field_within(line, line.len(), delimiter, index)
}

/// [`unquoted_field`] of the line `room[..len]`, where the bytes after it in `room` (the rest
/// of a read buffer) may be read and ignored: the line's last window is then read as 32 bytes
/// from where it starts, bits past the line masked off, even for a line shorter than 32 bytes.
/// Without room past it, the last window of a line of 32 bytes or more is its last 32 bytes,
/// those looked at already masked off, and a shorter line is read byte by byte. A byte loop over
/// the last up to 31 bytes took 12 ns a line more for a key in the last field of the probe's
/// 75-byte lines, and about 11 ns a line of a file of 8-byte ids, a third of its build.
#[inline(always)]
pub fn unquoted_field_within(room: &[u8], len: usize, delimiter: u8, index: usize) -> Result<&[u8], KeyError> {
    let line = &room[..len];
    let mut start = 0; // where the current field begins
    let mut seen = 0; // delimiters passed
    let mut window = 0;
    while window + 32 <= line.len() {
        let block = line[window..window + 32].try_into().expect("32 bytes");
        if let Some(end) = pass_delimiters(crate::bytemask::mask32(block, delimiter), window, index, &mut seen, &mut start) {
            return Ok(&line[start..end]);
        }
        window += 32;
    }
    if window < line.len() {
        let (mask, base) = if let Some(block) = room.get(window..window + 32) {
            // The line's last bytes and whatever follows them, the latter masked off.
            let block = block.try_into().expect("32 bytes");
            (crate::bytemask::mask32(block, delimiter) & (u32::MAX >> (32 - (line.len() - window))), window)
        } else if line.len() >= 32 {
            // The line's last 32 bytes, those looked at already masked off.
            let base = line.len() - 32;
            let block = line[base..].try_into().expect("32 bytes");
            (crate::bytemask::mask32(block, delimiter) & (u32::MAX << (window - base)), base)
        } else {
            (short_line_mask(&line[window..], delimiter), window)
        };
        if let Some(end) = pass_delimiters(mask, base, index, &mut seen, &mut start) {
            return Ok(&line[start..end]);
        }
    }
    if seen == index {
        Ok(&line[start..])
    } else {
        Err(KeyError::MissingField { fields: seen + 1 })
    }
}

/// The key field of a line whose quoted fields are each a whole field (`"…"` between
/// delimiters, with no quote inside; delimiters may be): its fields are the pieces between the
/// delimiters outside quotes, a quoted one's content the piece without its quotes, as the RFC
/// 4180 reading ([`quoted_field`]) finds them. Files written with every field (or every text
/// field) in quotes, as R's `write.csv`, Python's `QUOTE_ALL` and Spark's `quoteAll` write them,
/// and files that quote only the fields that hold a delimiter (`"Smith, John"`), are made of
/// such lines; read through that reading, field by field, a build took three times as long as
/// over the same file unquoted. A quoted field may hold escaped quotes (`""`), as text fields
/// written by spreadsheets and databases often do; a key that does is read as it is written,
/// and said to be escaped (see [`unescape_quotes`]). None for a line with a quote that
/// neither opens a field nor is half of an escaped quote, a closing quote (in pairs from the
/// line's start) followed by anything but a delimiter or an escaped quote's second half (text
/// after a quoted field), a quote left open, or without the field: the general reading decides
/// those.
/// `room` and `len` are as for [`unquoted_field_within`]; the whole line is read, as the
/// general reading reads it whole.
#[inline(always)]
pub(crate) fn simply_quoted_field_within(room: &[u8], len: usize, delimiter: u8, index: usize) -> Option<SimplyQuoted<'_>> {
    let (mut seen, mut start, mut key_end) = (0, 0, None);
    let quotes = walk_simply_quoted(room, len, delimiter, |mask, base| {
        if key_end.is_none() {
            key_end = pass_delimiters(mask, base, index, &mut seen, &mut start);
        }
    })?;
    let end = match key_end {
        Some(end) => end,
        None if seen == index => len,
        None => return None,
    };
    let (key, in_quotes) = unquote_whole(&room[start..end]);
    let escaped = quotes.escaped && holds_quote(key);
    Some(SimplyQuoted { key, in_quotes, quotes: quotes.any, escaped })
}

/// A key [`simply_quoted_field_within`] read with its escaped quotes (`""`, so checked), each
/// made one quote in `out`.
pub(crate) fn unescape_quotes<'a>(key: &[u8], out: &'a mut Vec<u8>) -> &'a [u8] {
    out.clear();
    let mut rest = key;
    while let Some(at) = memchr::memchr(b'"', rest) {
        out.extend_from_slice(&rest[..=at]);
        rest = &rest[at + 2..];
    }
    out.extend_from_slice(rest);
    out
}

/// Whether a field [`walk_simply_quoted`] passed, without its quotes ([`unquote_whole`]),
/// holds a quote: then one escaped (`""`), as only quoted fields hold quotes.
#[inline(always)]
fn holds_quote(field: &[u8]) -> bool {
    memchr::memchr(b'"', field).is_some()
}

/// A line's key field as [`simply_quoted_field_within`] reads it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SimplyQuoted<'a> {
    /// The field, without its quotes (its escaped quotes still written twice).
    pub key: &'a [u8],
    /// Whether the key was written in quotes (then it is never NULL).
    pub in_quotes: bool,
    /// Whether the line has a quote at all.
    pub quotes: bool,
    /// Whether the key holds escaped quotes, to be made one each ([`unescape_quotes`]).
    pub escaped: bool,
}

/// A field of a line [`walk_simply_quoted`] passed, without its quotes if it opens with one
/// (it then closes with one: the walk checked), and whether it did.
#[inline(always)]
fn unquote_whole(field: &[u8]) -> (&[u8], bool) {
    match field.first() == Some(&b'"') {
        true => (&field[1..field.len() - 1], true),
        false => (field, false),
    }
}

/// Walks the line `room[..len]` 32 bytes at a time (reading the room past it as
/// [`unquoted_field_within`] does), handing `each` every window's delimiters outside quotes as
/// a mask and the window's start, and checks that its quoted fields are whole fields (see
/// [`simply_quoted_field_within`]). Returns what it found of the line's quotes, or None where
/// they are not so.
#[inline(always)]
fn walk_simply_quoted(room: &[u8], len: usize, delimiter: u8, mut each: impl FnMut(u32, usize)) -> Option<LineQuotes> {
    let line = &room[..len];
    let mut walk = QuoteWalk { inside: false, after_field: true, closed_last: false, quotes: LineQuotes { any: false, escaped: false } };
    let mut window = 0;
    while window + 32 <= len {
        let block = line[window..window + 32].try_into().expect("32 bytes");
        let fields = walk.window(crate::bytemask::mask32(block, delimiter), crate::bytemask::mask32(block, b'"'), 32)?;
        each(fields, window);
        window += 32;
    }
    if window < len {
        let n = len - window;
        let (delimiters, quotes) = match room.get(window..window + 32) {
            // The line's last bytes and whatever follows them, the latter masked off.
            Some(block) => {
                let block = block.try_into().expect("32 bytes");
                let within = u32::MAX >> (32 - n);
                (crate::bytemask::mask32(block, delimiter) & within, crate::bytemask::mask32(block, b'"') & within)
            }
            None => (short_line_mask(&line[window..], delimiter), short_line_mask(&line[window..], b'"')),
        };
        let fields = walk.window(delimiters, quotes, n)?;
        each(fields, window);
    }
    (!walk.inside).then_some(walk.quotes)
}

/// What [`walk_simply_quoted`] found of a line's quotes.
#[derive(Clone, Copy)]
struct LineQuotes {
    /// Whether the line has a quote.
    any: bool,
    /// Whether a quoted field holds an escaped quote (`""`).
    escaped: bool,
}

/// What [`walk_simply_quoted`] carries from one window of a line to the next.
struct QuoteWalk {
    /// Whether the windows so far end inside quotes.
    inside: bool,
    /// Whether the last window ended in a delimiter outside quotes (the line's start counts as
    /// one): a quote that opens the next window opens a field.
    after_field: bool,
    /// Whether the last window ended in a closing quote, which a delimiter or a quote (the
    /// pair is an escaped quote) must follow.
    closed_last: bool,
    /// What the windows so far held of quotes.
    quotes: LineQuotes,
}

impl QuoteWalk {
    /// Checks a window of `n` bytes whose delimiters and quotes are the bits of `delimiters`
    /// and `quotes`, and returns the delimiters that end fields: those outside quotes. Quotes
    /// pair up in order: a bit of `inside` is set from an opening quote up to (not including)
    /// its closing one, the prefix XOR of the quotes. An escaped quote (`""`) in a quoted field
    /// is so a closing quote and an opening one right after it, which leave the field open.
    #[inline(always)]
    fn window(&mut self, delimiters: u32, quotes: u32, n: usize) -> Option<u32> {
        let mut inside = quotes;
        for shift in [1, 2, 4, 8, 16] {
            inside ^= inside << shift;
        }
        if self.inside {
            inside = !inside;
        }
        let (opening, closing) = (quotes & inside, quotes & !inside);
        let fields = delimiters & !inside;
        let field_starts = fields << 1 | self.after_field as u32;
        let after_closing = closing << 1 | self.closed_last as u32;
        let last = 1u32 << (n - 1);
        // Each opening quote opens a field or follows a closing quote (the pair is an escaped
        // quote), and each closing quote is followed by a delimiter or an opening quote (the
        // last byte's by the next window's first, or the line's end): a field that opens with a
        // quote is a quoted field, closed where the field ends, whose content holds only escaped
        // quotes; any other holds no quote at all.
        if opening & !(field_starts | after_closing) != 0 || closing & !last & !((fields | opening) >> 1) != 0 || (self.closed_last && (fields | opening) & 1 == 0) {
            return None;
        }
        self.inside = inside & last != 0;
        self.after_field = fields & last != 0;
        self.closed_last = closing & last != 0;
        self.quotes.any |= quotes != 0;
        self.quotes.escaped |= opening & after_closing != 0;
        Some(fields)
    }
}

/// The delimiters of a line of fewer than 32 bytes with no room after it, as a mask, byte by
/// byte.
#[inline(always)]
fn short_line_mask(bytes: &[u8], delimiter: u8) -> u32 {
    bytes.iter().enumerate().fold(0, |mask, (i, &b)| mask | ((b == delimiter) as u32) << i)
}

/// Passes the delimiters whose bits `mask` sets (bit j: the byte at `base` + j), counting them
/// in `seen` and moving `start` past each: where one is delimiter `index`, the key ends there.
#[inline(always)]
fn pass_delimiters(mut mask: u32, base: usize, index: usize, seen: &mut usize, start: &mut usize) -> Option<usize> {
    while mask != 0 {
        let at = base + mask.trailing_zeros() as usize;
        if *seen == index {
            return Some(at);
        }
        *seen += 1;
        *start = at + 1;
        mask &= mask - 1;
    }
    None
}

/// The RFC 4180 path, taken only by lines that contain a quote. The whole line is parsed, not
/// just up to the key: an unclosed quote after the key means a quoted field with an embedded
/// newline, whose next physical line must not be taken for a record. Returns the key, and
/// whether it was written in quotes.
fn quoted_field<'a>(line: &'a [u8], delimiter: u8, index: usize, scratch: &'a mut Vec<u8>) -> Result<(&'a [u8], bool), KeyError> {
    /// Where the key was found: a range of the line (and whether it was in quotes), or
    /// unescaped into `scratch` (from quotes).
    enum Found {
        InLine(std::ops::Range<usize>, bool),
        InScratch,
    }
    let mut pos = 0;
    let mut field = 0;
    let mut found = None;
    loop {
        let is_key = field == index;
        let next = if line.get(pos) == Some(&b'"') {
            let (after, content) = parse_quoted(line, pos, delimiter, is_key.then_some(&mut *scratch))?;
            if is_key {
                found = Some(content.map_or(Found::InScratch, |range| Found::InLine(range, true)));
            }
            after
        } else {
            let end = memchr::memchr(delimiter, &line[pos..]).map_or(line.len(), |i| pos + i);
            if is_key {
                found = Some(Found::InLine(pos..end, false));
            }
            end
        };
        if next >= line.len() {
            break;
        }
        pos = next + 1;
        field += 1;
    }
    match found {
        Some(Found::InLine(range, in_quotes)) => Ok((&line[range], in_quotes)),
        Some(Found::InScratch) => Ok((scratch.as_slice(), true)),
        None => Err(KeyError::MissingField { fields: field + 1 }),
    }
}

/// Parses the quoted field opening at `line[open]`. Returns the index just past it (a delimiter
/// or the line's end) and, when the content has no escaped quotes, its range in `line`; otherwise
/// the unescaped content is written to `out` (when given) and the range is `None`.
fn parse_quoted(
    line: &[u8],
    open: usize,
    delimiter: u8,
    mut out: Option<&mut Vec<u8>>,
) -> Result<(usize, Option<std::ops::Range<usize>>), KeyError> {
    let mut pos = open + 1;
    let mut escaped = false;
    if let Some(o) = out.as_deref_mut() {
        o.clear();
    }
    loop {
        let rel = memchr::memchr(b'"', &line[pos..]).ok_or(KeyError::UnclosedQuote)?;
        let quote = pos + rel;
        if let Some(o) = out.as_deref_mut() {
            o.extend_from_slice(&line[pos..quote]);
        }
        if line.get(quote + 1) == Some(&b'"') {
            escaped = true;
            if let Some(o) = out.as_deref_mut() {
                o.push(b'"');
            }
            pos = quote + 2;
            continue;
        }
        let after = quote + 1;
        if after < line.len() && line[after] != delimiter {
            return Err(KeyError::StrayQuote);
        }
        let range = (!escaped).then_some(open + 1..quote);
        return Ok((after, range));
    }
}

/// Splits a whole line into unquoted fields (for headers; not the hot path), as
/// [`extract_key`] reads each.
pub fn split_fields(line: &[u8], delimiter: u8, scratch: &mut Vec<u8>) -> Result<Vec<Vec<u8>>, String> {
    let mut fields = Vec::new();
    walk_fields(line, delimiter, scratch, |field, _| fields.push(field.to_vec())).map_err(|(index, e)| e.describe(index))?;
    Ok(fields)
}

/// Hands `each` every field of `line`, in order, as [`extract_key`] reads it (quotes undone),
/// and whether it was written in quotes, in one walk: asking for each field in turn walked the
/// line from its start every time, so a line of n fields took n² steps (minutes for a header of
/// a million). Returns how many fields there are, or the first unreadable field's index and
/// error.
fn walk_fields(line: &[u8], delimiter: u8, scratch: &mut Vec<u8>, mut each: impl FnMut(&[u8], bool)) -> Result<usize, (usize, KeyError)> {
    let mut pos = 0;
    let mut index = 0;
    loop {
        let next = if line.get(pos) == Some(&b'"') {
            let (after, content) = parse_quoted(line, pos, delimiter, Some(&mut *scratch)).map_err(|e| (index, e))?;
            each(content.map_or(scratch.as_slice(), |range| &line[range]), true);
            after
        } else {
            let end = memchr::memchr(delimiter, &line[pos..]).map_or(line.len(), |i| pos + i);
            each(&line[pos..end], false);
            end
        };
        index += 1;
        if next >= line.len() {
            return Ok(index);
        }
        pos = next + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of up to 6 bytes of `a`, `,` and `"`, then 2,000 random ones of up to 60 bytes
    /// of `a`, `b`, `,` and `"` (twice as often), drawn from `seed`: the lines every
    /// field-splitting test is checked on.
    fn csv_lines(seed: u64) -> Vec<Vec<u8>> {
        let mut lines: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..6 {
            let longer: Vec<Vec<u8>> = lines.iter().flat_map(|l| [b'a', b',', b'"'].map(|b| [&l[..], &[b]].concat())).collect();
            lines.extend(longer);
        }
        let mut rng = crate::xorshift::XorShift::new(seed);
        for _ in 0..2000 {
            let len = (rng.next() % 60) as usize;
            lines.push((0..len).map(|_| b"ab,\"\""[(rng.next() % 5) as usize]).collect());
        }
        lines
    }

    /// `split_fields` gives what asking [`extract_key`] for each field in turn gives (its
    /// definition before it walked the line once), errors included, on every line of up to 6
    /// bytes of `a`, `,` and `"`, and on random longer ones.
    #[test]
    fn split_fields_is_extract_key_of_every_field() {
        let by_index = |line: &[u8]| -> Result<Vec<Vec<u8>>, ()> {
            let mut fields = Vec::new();
            loop {
                match extract_key(line, b',', fields.len(), &mut Vec::new()) {
                    Ok(f) => fields.push(f.to_vec()),
                    Err(KeyError::MissingField { .. }) => return Ok(fields),
                    Err(_) => return Err(()),
                }
            }
        };
        let lines = csv_lines(11);
        let (mut ok, mut failed) = (0, 0);
        for line in &lines {
            let got = split_fields(line, b',', &mut Vec::new()).map_err(|_| ());
            assert_eq!(got, by_index(line), "{:?}", String::from_utf8_lossy(line));
            if got.is_ok() { ok += 1 } else { failed += 1 }
        }
        assert!(ok > 500 && failed > 500, "both outcomes exercised: {ok} and {failed}");
    }

    /// `composite_key_of_every_field` gives what asking [`key_or_null`] for each field in turn
    /// gives (its definition before it walked the line once), errors included (but for their
    /// index: the walk names the unreadable field, where asking for field 0 named 0), on every
    /// line of up to 6 bytes of `a`, `,` and `"` (`a` standing for NULL), and on random longer
    /// ones.
    #[test]
    fn composite_key_of_every_field_is_key_or_null_of_each() {
        let null = Some(&b"a"[..]);
        let by_index = |line: &[u8]| -> Result<(usize, bool, Vec<u8>), KeyError> {
            let (mut out, mut present, mut index) = (Vec::new(), true, 0);
            loop {
                match key_or_null(line, b',', index, true, null, &mut Vec::new()) {
                    Ok(field) => push_field(&mut out, field, &mut present),
                    Err(KeyError::MissingField { .. }) => return Ok((index, present, out)),
                    Err(e) => return Err(e),
                }
                index += 1;
            }
        };
        let lines = csv_lines(12);
        let (mut present, mut null_seen, mut failed) = (0, 0, 0);
        for line in &lines {
            let mut out = Vec::new();
            let got = composite_key_of_every_field(line, b',', null, &mut Vec::new(), &mut out).map(|(fields, all)| (fields, all, out)).map_err(|(_, e)| e);
            assert_eq!(got, by_index(line), "{:?}", String::from_utf8_lossy(line));
            match got {
                Ok((_, true, _)) => present += 1,
                Ok((_, false, _)) => null_seen += 1,
                Err(_) => failed += 1,
            }
        }
        assert!(present > 300 && null_seen > 300 && failed > 300, "every outcome exercised: {present}, {null_seen} and {failed}");
    }

    /// A line loses one trailing LF, then one CR: every line of up to 4 bytes of `a`, CR and LF.
    #[test]
    fn trim_line_end_drops_one_lf_then_one_cr() {
        let mut lines: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let longer: Vec<Vec<u8>> = lines.iter().flat_map(|l| [b'a', b'\r', b'\n'].map(|b| [&l[..], &[b]].concat())).collect();
            lines.extend(longer);
        }
        lines.sort();
        lines.dedup();
        assert_eq!(lines.len(), 1 + 3 + 9 + 27 + 81);
        for line in &lines {
            let mut want = &line[..];
            if want.last() == Some(&b'\n') {
                want = &want[..want.len() - 1];
            }
            if want.last() == Some(&b'\r') {
                want = &want[..want.len() - 1];
            }
            assert_eq!(trim_line_end(line), want, "{line:?}");
        }
    }

    fn key(line: &str, index: usize) -> Result<String, KeyError> {
        let mut scratch = Vec::new();
        extract_key(line.as_bytes(), b',', index, &mut scratch).map(|k| String::from_utf8(k.to_vec()).unwrap())
    }

    #[test]
    fn plain_fields() {
        assert_eq!(key("a,b,c", 0).unwrap(), "a");
        assert_eq!(key("a,b,c", 2).unwrap(), "c");
        assert_eq!(key("a,,c", 1).unwrap(), "");
        assert_eq!(key("", 0).unwrap(), "");
        assert_eq!(key("a,b", 2), Err(KeyError::MissingField { fields: 2 }));
    }

    /// Every field of random unquoted lines of 0–130 bytes, mostly delimiters or mostly not, is
    /// what splitting the line gives, and the field past the last is missing: the 32-byte
    /// windows, the tail read as the last 32 bytes, and short lines' byte loop alike; and the
    /// same with 0–40 bytes of room after the line, full of delimiters, read and ignored.
    #[test]
    fn unquoted_fields_are_the_line_split_at_its_delimiters() {
        let mut rng = crate::xorshift::XorShift::new(12);
        for round in 0..4000 {
            let len = (rng.next() % 131) as usize;
            let one_in = [2, 5, 17, 60][round % 4];
            let line: Vec<u8> = (0..len).map(|_| if rng.next().is_multiple_of(one_in) { b';' } else { b'a' + (rng.next() % 3) as u8 }).collect();
            let room = [&line[..], &vec![b';'; (rng.next() % 41) as usize]].concat();
            let fields: Vec<&[u8]> = line.split(|&b| b == b';').collect();
            for (i, field) in fields.iter().enumerate() {
                assert_eq!(unquoted_field(&line, b';', i), Ok(*field), "{:?} field {i}", String::from_utf8_lossy(&line));
                assert_eq!(unquoted_field_within(&room, len, b';', i), Ok(*field), "{:?} field {i}, room {}", String::from_utf8_lossy(&line), room.len());
            }
            let missing = Err(KeyError::MissingField { fields: fields.len() });
            assert_eq!(unquoted_field(&line, b';', fields.len()), missing);
            assert_eq!(unquoted_field_within(&room, len, b';', fields.len()), missing);
        }
    }

    /// The key as the general reading finds it (the RFC 4180 one for a line with a quote) and
    /// whether it was in quotes.
    fn general_key(line: &[u8], index: usize) -> Result<(Vec<u8>, bool), KeyError> {
        match memchr::memchr(b'"', line) {
            None => unquoted_field(line, b';', index).map(|f| (f.to_vec(), false)),
            Some(_) => quoted_field(line, b';', index, &mut Vec::new()).map(|(f, q)| (f.to_vec(), q)),
        }
    }

    /// Checks `simply_quoted_field_within` on `line` for every field and the one past the last,
    /// with `room` after it: where it reads a key, the general reading finds the same, in quotes
    /// alike. Returns how many fields it read.
    fn check_simply_quoted(line: &[u8], room: &[u8]) -> usize {
        let text = [line, room].concat();
        let mut read = 0;
        for index in 0..=line.len() + 1 {
            let Some(fast) = simply_quoted_field_within(&text, line.len(), b';', index) else { continue };
            let shown = String::from_utf8_lossy(line);
            let key = if fast.escaped { unescape_quotes(fast.key, &mut Vec::new()).to_vec() } else { fast.key.to_vec() };
            assert_eq!(fast.escaped, fast.key.contains(&b'"'), "{shown:?} field {index}");
            assert_eq!(general_key(line, index), Ok((key, fast.in_quotes)), "{shown:?} field {index}, room {}", room.len());
            assert_eq!(fast.quotes, line.contains(&b'"'), "{shown:?}");
            read += 1;
        }
        read
    }

    /// Random lines of 0–130 bytes of `a`, `;` and quotes (in several mixes), with 0–40 bytes
    /// of quotes and delimiters after them: wherever the fast reading of quoted lines reads a
    /// key, it is the general reading's. And lines of fields each plain or wholly in quotes
    /// (quoted ones holding delimiters and escaped quotes too; some lines with a byte of another
    /// kind put in somewhere) are read, every field (those with escaped quotes said to be
    /// escaped, and read unescaped as the general reading reads them), where nothing was put in.
    #[test]
    fn simply_quoted_lines_read_as_the_general_reading_does() {
        let mut rng = crate::xorshift::XorShift::new(29);
        for round in 0..6000 {
            let len = (rng.next() % 131) as usize;
            let alphabet: &[u8] = [&b"a;\""[..], b"aaaa;\"", b"aaaaaaa;;\"\"", b"ab;\"\"\""][round % 4];
            let line: Vec<u8> = (0..len).map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize]).collect();
            let room: Vec<u8> = (0..rng.next() % 41).map(|_| b";\"a"[(rng.next() % 3) as usize]).collect();
            check_simply_quoted(&line, &room);
        }
        let (mut simple_lines, mut escaped_fields) = (0, 0);
        for round in 0..6000 {
            let fields = 1 + (rng.next() % 12) as usize;
            let mut line = Vec::new();
            let mut escaped = 0;
            for f in 0..fields {
                if f > 0 {
                    line.push(b';');
                }
                let quoted = !rng.next().is_multiple_of(3);
                // A quoted field may hold delimiters and escaped quotes.
                let mut text = Vec::new();
                for _ in 0..rng.next() % 15 {
                    match rng.next() % 16 {
                        0..=3 if quoted => text.push(b';'),
                        4 if quoted => text.extend(b"\"\""),
                        r => text.push(b'a' + (r % 3) as u8),
                    }
                }
                escaped += text.contains(&b'"') as usize;
                if quoted {
                    line.push(b'"');
                }
                line.extend_from_slice(&text);
                if quoted {
                    line.push(b'"');
                }
            }
            let intact = round % 3 != 0;
            if !intact && !line.is_empty() {
                let at = (rng.next() % line.len() as u64) as usize;
                line.insert(at, b";\"a"[(rng.next() % 3) as usize]);
            }
            let room: Vec<u8> = (0..rng.next() % 41).map(|_| b";\"a"[(rng.next() % 3) as usize]).collect();
            let read = check_simply_quoted(&line, &room);
            if intact {
                assert_eq!(read, fields, "{:?}: every field read", String::from_utf8_lossy(&line));
                simple_lines += 1;
                escaped_fields += escaped;
            }
        }
        assert!(simple_lines > 3000 && escaped_fields > 1000, "{simple_lines} lines, {escaped_fields} fields with an escaped quote");
        // A quote or a delimiter in every place about a quoted field's closing quote, which falls
        // on each byte of the first three windows and their ends.
        for pad in 0..100 {
            let field = format!("\"{}\"", "a".repeat(pad));
            for line in [format!("{field}x;\"k\""), format!("{field};\"k\"x"), format!("{field}\";k"), format!("b{field};k"), format!("{field};;\"\""), format!("\"{};{}\";k", "a".repeat(pad / 2), "a".repeat(pad / 2))] {
                check_simply_quoted(line.as_bytes(), b"");
                check_simply_quoted(line.as_bytes(), b"\";\"");
            }
            let intact = format!("{field};\"k\";;x");
            assert_eq!(check_simply_quoted(intact.as_bytes(), b"\""), 4, "{intact}");
            // A delimiter in quotes at each byte of the first windows, and a quote in a field
            // that does not open with one, after it.
            let half = "a".repeat(pad / 2);
            let holding = format!("\"{half};{half}\";\"k\";x");
            assert_eq!(check_simply_quoted(holding.as_bytes(), b";"), 3, "{holding}");
            check_simply_quoted(format!("x\"{half};{half}\";k").as_bytes(), b"");
            // An escaped quote at each byte of the first windows, its halves split between two
            // windows too, before a key and after one; and lines left to the general reading:
            // text after the closing quote that follows an escaped one, a field left open after
            // one, text after a closing quote.
            let escaped = format!("\"{half}\"\"{half}\";\"k\";x;\"{half}\"\"\"");
            assert_eq!(check_simply_quoted(escaped.as_bytes(), b"\";"), 4, "{escaped}");
            assert_eq!(check_simply_quoted(format!("\"{half}\"\"\";\"k\"").as_bytes(), b""), 2);
            for left in [format!("\"{half}\"\"\"x;k"), format!("\"{half}\"\"{half};k"), format!("\"{half}\"x\";k")] {
                assert_eq!(check_simply_quoted(left.as_bytes(), b";"), 0, "{left}");
            }
        }
    }

    /// The decimal parser reads as `str::parse` does, for i64 and i32: every string of up to 4
    /// bytes of signs, digits, the bytes next to them, a letter and a space, random ones of up to 22 digits (past both ranges),
    /// and each range's ends and the numbers past them.
    #[test]
    fn numbers_parse_as_the_standard_library_parses_them() {
        let check = |key: &[u8]| {
            let text = std::str::from_utf8(key).unwrap();
            assert_eq!(parse_i64(key), text.parse::<i64>().ok(), "{text:?}");
            assert_eq!(parse_i64(key).and_then(|v| i32::try_from(v).ok()), text.parse::<i32>().ok(), "{text:?} as i32");
        };
        let mut short: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            // The bytes just below and above the digits ('/' and ':') among them.
            let longer: Vec<Vec<u8>> = short.iter().flat_map(|s| b"+-09/:a ".map(|b| [&s[..], &[b]].concat())).collect();
            short.extend(longer);
        }
        short.iter().for_each(|key| check(key));
        let mut rng = crate::xorshift::XorShift::new(31);
        for _ in 0..20_000 {
            let sign = ["", "-", "+"][(rng.next() % 3) as usize];
            let digits: String = (0..1 + rng.next() % 22).map(|_| char::from(b'0' + (rng.next() % 10) as u8)).collect();
            check(format!("{sign}{digits}").as_bytes());
        }
        for edge in [i64::MIN as i128, i64::MAX as i128, i32::MIN as i128, i32::MAX as i128] {
            for near in edge - 2..=edge + 2 {
                check(near.to_string().as_bytes());
                check(format!("+{near}").as_bytes());
            }
        }
    }

    #[test]
    fn plain_fields_past_the_first_windows() {
        let fields: Vec<String> = (0..40).map(|i| format!("f{i}-{}", "x".repeat(i % 7))).collect();
        let line = fields.join(",");
        for (i, f) in fields.iter().enumerate() {
            assert_eq!(key(&line, i).unwrap(), *f, "field {i}");
        }
        assert_eq!(key(&line, 40), Err(KeyError::MissingField { fields: 40 }));
        let commas = ",".repeat(70);
        assert_eq!(key(&commas, 69).unwrap(), "");
        assert_eq!(key(&commas, 70).unwrap(), "");
        assert_eq!(key(&commas, 71), Err(KeyError::MissingField { fields: 71 }));
    }

    /// Records end at newlines outside quoted fields; a quote inside an unquoted field is a
    /// plain byte; a record not known to end (its quote open, or a quote as the last byte,
    /// which may be the first of an escaped pair) is not given.
    #[test]
    fn record_ends_are_the_newlines_outside_quoted_fields() {
        let ends = |text: &str, delimiter: u8| record_ends(text.as_bytes(), delimiter).collect::<Vec<_>>();
        assert_eq!(ends("a,b\n1,2\n", b','), [4, 8]);
        assert_eq!(ends("1,\"x\ny\"\n2,z\n", b','), [8, 12]);
        assert_eq!(ends("1,\"a\"\"\nb\"\n", b','), [10]);
        assert_eq!(ends("1,\"a,\n\",3\r\n4\n", b','), [11, 13]);
        assert_eq!(ends("1,a\"b\n2,c\n", b','), [6, 10]);
        assert_eq!(ends("\"\n\",x\n\n", b','), [6, 7]);
        assert_eq!(ends(",\"\n\"\n", b','), [5]);
        assert_eq!(ends("1|\"a|\nb\"\n", b'|'), [9]);
        // A comma is no delimiter for `|`: the quote does not open a field.
        assert_eq!(ends("1,\"a\n2\n", b'|'), [5, 7]);
        assert_eq!(ends("1,a\n2,b", b','), [4]);
        assert_eq!(ends("1,a\n2,\"b\n", b','), [4]);
        assert_eq!(ends("1,a\n2,\"b\"", b','), [4]);
        assert_eq!(ends("1,\"b\"\"", b','), Vec::<usize>::new());
        assert_eq!(ends("", b','), Vec::<usize>::new());
    }

    /// The last record end found from the first quote's line is the last of all the ends.
    #[test]
    fn last_record_end_is_the_last_of_the_record_ends() {
        let mut rng = crate::xorshift::XorShift::new(17);
        for round in 0..20_000 {
            let len = (rng.next() % 40) as usize;
            let alphabet: &[u8] = if round % 2 == 0 { b"a,\"\n\n" } else { b"ab,,\n\"" };
            let bytes: Vec<u8> = (0..len).map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize]).collect();
            assert_eq!(last_record_end(&bytes, b','), record_ends(&bytes, b',').last(), "{:?}", String::from_utf8_lossy(&bytes));
        }
    }

    /// A record start found from just past any newline is one of the record ends read from the
    /// text's start, whichever state that newline is in; and records of the usual shapes give
    /// one within a record or two.
    #[test]
    fn a_certain_record_start_is_a_record_end_read_from_the_start() {
        let mut rng = crate::xorshift::XorShift::new(29);
        let (mut newlines, mut found) = (0, 0);
        for round in 0..20_000 {
            let len = (rng.next() % 60) as usize;
            let alphabet: &[u8] = if round % 2 == 0 { b"a,\"\n\n" } else { b"ab,,\n\"\"" };
            let bytes: Vec<u8> = (0..len).map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize]).collect();
            let ends: Vec<usize> = record_ends(&bytes, b',').collect();
            for s in memchr::memchr_iter(b'\n', &bytes).map(|i| i + 1) {
                newlines += 1;
                if let Some(start) = certain_record_start(&bytes[s..], b',', usize::MAX) {
                    found += 1;
                    assert!(ends.contains(&(s + start)), "{:?} from {s}: {}", String::from_utf8_lossy(&bytes), s + start);
                }
            }
        }
        // Random quotes often leave the two readings out of step to the end; not always.
        assert!(found > newlines / 10, "{found} of {newlines}");
        // Without a quote to tell them apart by, only the limit on a record's length does.
        let plain = b"a,b\nc,d\ne,f\n";
        assert_eq!(certain_record_start(plain, b',', usize::MAX), None);
        assert_eq!(certain_record_start(plain, b',', 12), Some(4));
        assert_eq!(certain_record_start(plain, b',', 13), None, "not known to stay shut for 13 bytes");
        assert_eq!(certain_record_start(b"abc,def\n\"x\n", b',', 8), Some(8));
        assert_eq!(certain_record_start(b"abc,def\n\"x\n", b',', 7), None, "a record longer than the limit either way");
        let usual = "1,\"Main St\nSpringfield\",\"x\"\n2,plain,\"a \"\"b\"\"\"\n3,\"\n\n\",y\r\n4,\"t,u\",\"\"\n5,z\n";
        // Twice: past its last record a text has no quote to tell the readings apart by.
        let twice = usual.repeat(2);
        let ends: Vec<usize> = record_ends(twice.as_bytes(), b',').collect();
        for s in memchr::memchr_iter(b'\n', usual.as_bytes()).map(|i| i + 1) {
            let start = s + certain_record_start(&twice.as_bytes()[s..], b',', usize::MAX).unwrap_or_else(|| panic!("none from {s}"));
            let next = ends.iter().position(|&e| e >= s).unwrap();
            assert!(ends[next..next + 3].contains(&start), "from {s}: {start}, the ends {ends:?}");
        }
    }

    /// A record end found near the end is one of the record ends, and there is one wherever
    /// there is a last one.
    #[test]
    fn a_late_record_end_is_a_record_end() {
        let mut rng = crate::xorshift::XorShift::new(23);
        let mut early = 0;
        for round in 0..20_000 {
            let len = (rng.next() % 120) as usize;
            let alphabet: &[u8] = if round % 2 == 0 { b"a,\"\n\nbb" } else { b"ab,,\n\"" };
            let bytes: Vec<u8> = (0..len).map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize]).collect();
            let ends: Vec<usize> = record_ends(&bytes, b',').collect();
            let found = record_end_in_tail(&bytes, b',', 8);
            assert_eq!(found.is_some(), !ends.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));
            if let Some(end) = found {
                assert!(ends.contains(&end), "{:?}: {end}", String::from_utf8_lossy(&bytes));
                early += (end != *ends.last().unwrap()) as u32;
            }
        }
        assert!(early > 100, "{early} found before the last");
    }

    #[test]
    fn quoted_fields() {
        assert_eq!(key(r#""a,1",b"#, 0).unwrap(), "a,1");
        assert_eq!(key(r#""a,1",b"#, 1).unwrap(), "b");
        assert_eq!(key(r#"x,"say ""hi""",z"#, 1).unwrap(), r#"say "hi""#);
        assert_eq!(key(r#"x,"say ""hi""",z"#, 2).unwrap(), "z");
        assert_eq!(key(r#""","#, 0).unwrap(), "");
        assert_eq!(key(r#""42""#, 0).unwrap(), "42");
        assert_eq!(key(r#"x,"open"#, 1), Err(KeyError::UnclosedQuote));
        // An unclosed quote after the key is found too: the record runs onto the next line.
        assert_eq!(key(r#"1,"two"#, 0), Err(KeyError::UnclosedQuote));
        assert_eq!(key(r#"1,"a,b",x"#, 0).unwrap(), "1");
        assert_eq!(key("a,", 1).unwrap(), "");
        assert_eq!(key(r#""a"b,c"#, 1), Err(KeyError::StrayQuote));
        assert_eq!(key(r#""a",b"#, 2), Err(KeyError::MissingField { fields: 2 }));
        // A quote inside an unquoted field is kept as it is (lenient, as most readers are).
        assert_eq!(key(r#"ab"c,d"#, 1).unwrap(), "d");
    }

    #[test]
    fn key_field_by_name_and_index() {
        let header = b"id,name,segment\r\n";
        assert_eq!(KeyField::parse("name", true).unwrap().resolve(Some(header), b',', "f").unwrap(), 1);
        assert_eq!(KeyField::parse("3", true).unwrap().resolve(Some(header), b',', "f").unwrap(), 2);
        let err = KeyField::parse("nope", true).unwrap().resolve(Some(header), b',', "f").unwrap_err();
        assert!(err.to_string().contains("no column named \"nope\""), "{err}");
        assert!(!err.to_string().contains(';'), "no hint where none fits: {err}");
        // The usual causes are named: a name in another case, a file of another delimiter.
        let err = KeyField::parse("Name", true).unwrap().resolve(Some(header), b',', "f").unwrap_err();
        assert!(err.to_string().contains("no column named \"Name\" in the header (columns: id, name, segment); \"name\" differs only in case"), "{err}");
        for key in ["name", "2"] {
            let err = KeyField::parse(key, true).unwrap().resolve(Some(header), b'\t', "f.tsv").unwrap_err();
            assert!(err.to_string().contains("; the header is one field that holds ',': is the delimiter right?"), "{err}");
        }
        assert!(KeyField::parse("0", true).is_err());
        assert!(KeyField::parse("name", false).is_err());
    }

    /// A name that the header gives to two fields is ambiguous: refused, naming both, and not
    /// resolved to the first (a quoted name is the same name).
    #[test]
    fn a_name_given_to_two_fields_is_refused() {
        let header = b"id,\"name\",segment,name\n";
        let err = KeyField::parse("name", true).unwrap().resolve(Some(header), b',', "f.csv").unwrap_err();
        assert!(err.to_string().contains("f.csv: the header names fields 2 and 4 \"name\": give the key by its 1-based index"), "{err}");
        assert_eq!(KeyField::parse("4", true).unwrap().resolve(Some(header), b',', "f.csv").unwrap(), 3);
        assert_eq!(KeyField::parse("id", true).unwrap().resolve(Some(header), b',', "f.csv").unwrap(), 0);
    }

    /// A composite key holds each field after its length, unquoted, so that values that run
    /// together alike ("ab","c" and "a","bc") differ; a short record names the missing field.
    #[test]
    fn composite_keys_hold_each_field_after_its_length() {
        let key = |line: &[u8], indexes: &[usize]| {
            let (mut scratch, mut out) = (Vec::new(), Vec::new());
            let quoted = line.contains(&b'"');
            composite_key(line, b',', indexes, quoted, None, &mut scratch, &mut out).map(|present| {
                assert!(present, "no field is NULL without a null text");
                out
            })
        };
        assert_eq!(key(b"1,ab,c", &[1, 2]).unwrap(), b"\x02ab\x01c");
        assert_ne!(key(b"1,ab,c", &[1, 2]).unwrap(), key(b"1,a,bc", &[1, 2]).unwrap());
        assert_eq!(key(b"1,\"ab\",c", &[1, 2]).unwrap(), key(b"1,ab,c", &[1, 2]).unwrap(), "quotes are not part of a value");
        assert_eq!(key(b"1,ab,c", &[2, 1]).unwrap(), b"\x01c\x02ab", "fields in the key's order");
        assert_eq!(key(b"1,,c", &[1, 2]).unwrap(), b"\x00\x01c");
        let long = vec![b'x'; 300];
        let line = [b"1,".as_slice(), &long].concat();
        assert_eq!(key(&line, &[1]).unwrap()[..2], [0xac, 0x02], "300 as a two-byte varint");
        assert_eq!(key(b"1,ab", &[1, 2]), Err((2, KeyError::MissingField { fields: 2 })));
    }

    /// The one walk of an unquoted line gives the composite key that reading each field in turn
    /// gives, errors and NULLs included: random lines of 0-150 bytes (several 32-byte windows)
    /// of few and many fields (up to 151), 1-4 indexes in any order up to 70 (past the 16 and the 64 whose
    /// starts are kept on the stack too), some repeated, with and without a NULL text.
    #[test]
    fn a_composite_key_walked_once_is_its_fields_read_one_by_one() {
        let mut rng = crate::xorshift::XorShift::new(0x5DEE_CE66_D1CE_4E5B);
        let (mut keys, mut nulls, mut missing) = (0, 0, 0);
        for round in 0..20_000 {
            let len = (rng.next() % 151) as usize;
            // Every fourth line of many fields (most of its bytes commas), for keys past the 64th.
            let (alphabet, most): (&[u8], u64) = match round % 4 {
                3 => (b",,,n", 71),
                r if r % 2 == 0 => (b"ab,n", 21),
                _ => (b"abcdefg,n", 21),
            };
            let line: Vec<u8> = (0..len).map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize]).collect();
            let indexes: Vec<usize> = (0..1 + rng.next() % 4).map(|_| (rng.next() % most) as usize).collect();
            let null = (round % 3 == 0).then_some(&b"n"[..]);
            let by_field = || -> Result<(bool, Vec<u8>), (usize, KeyError)> {
                let (mut out, mut present) = (Vec::new(), true);
                for &index in &indexes {
                    push_field(&mut out, key_or_null(&line, b',', index, false, null, &mut Vec::new()).map_err(|e| (index, e))?, &mut present);
                }
                Ok((present, out))
            };
            let mut out = Vec::new();
            let walked = composite_key(&line, b',', &indexes, false, null, &mut Vec::new(), &mut out).map(|present| (present, out));
            assert_eq!(walked, by_field(), "{:?} {indexes:?}", String::from_utf8_lossy(&line));
            match walked {
                Ok((true, _)) => keys += 1,
                Ok((false, _)) => nulls += 1,
                Err(_) => missing += 1,
            }
        }
        assert!(keys > 1000 && nulls > 100 && missing > 1000, "every outcome exercised: {keys}, {nulls}, {missing}");
        // Past the fields a walk keeps, read field by field.
        let far = composite_key(b"a,b", b',', &[1, MOST_WALKED], false, None, &mut Vec::new(), &mut Vec::new());
        assert_eq!(far, Err((MOST_WALKED, KeyError::MissingField { fields: 2 })));
    }

    /// The one walk of a line whose quoted fields are whole fields gives the composite key
    /// that reading each field in turn gives, NULLs (only unquoted) and missing fields included:
    /// random lines of 1–12 fields, each plain or in quotes (holding delimiters and escaped
    /// quotes too), of 0–14 bytes (with a NULL text, `n`, among them), some with a byte put in
    /// somewhere, which may make it a line the walk leaves; 1–4 indexes, mostly of its fields or
    /// the one past them, else up to 20; 0–40 bytes of room after the line. The walk reads every
    /// line left intact that has a quote, unless a field of the key holds an escaped one.
    #[test]
    fn a_simply_quoted_composite_key_walked_once_is_its_fields_read_one_by_one() {
        let mut rng = crate::xorshift::XorShift::new(0x2545_F491_4F6C_DD1D);
        let (mut keys, mut nulls, mut missing, mut left, mut escaped_keys) = (0, 0, 0, 0, 0);
        for round in 0..20_000 {
            let mut line = Vec::new();
            let fields = 1 + rng.next() % 12;
            let mut escaped = Vec::new();
            for f in 0..fields {
                if f > 0 {
                    line.push(b',');
                }
                let quoted = rng.next().is_multiple_of(2);
                // A quoted field may hold delimiters and escaped quotes.
                let bytes = |r: u64| match r % 20 {
                    0..=3 if quoted => &b","[..],
                    4 if quoted => b"\"\"",
                    r => [b"a", b"b", b"c"][(r % 3) as usize],
                };
                let text: Vec<u8> = match rng.next() % 3 {
                    0 => b"n".to_vec(),
                    _ => (0..rng.next() % 15).flat_map(|_| bytes(rng.next())).copied().collect(),
                };
                if text.contains(&b'"') {
                    escaped.push(f as usize);
                }
                match quoted {
                    false => line.extend_from_slice(&text),
                    true => line.extend([&b"\""[..], &text, b"\""].concat()),
                }
            }
            let intact = round % 4 != 0;
            if !intact {
                let at = (rng.next() % (line.len() as u64 + 1)) as usize;
                line.insert(at, b",\"a"[(rng.next() % 3) as usize]);
            }
            let room: Vec<u8> = (0..rng.next() % 41).map(|_| b",\"a"[(rng.next() % 3) as usize]).collect();
            let text = [&line[..], &room].concat();
            // Mostly fields of the line or the one past it, sometimes any up to 20.
            let most = if round % 8 == 0 { 21 } else { fields + 1 };
            let indexes: Vec<usize> = (0..1 + rng.next() % 4).map(|_| (rng.next() % most) as usize).collect();
            let null = (round % 3 != 0).then_some(&b"n"[..]);
            let mut out = Vec::new();
            let escaped_key = indexes.iter().any(|index| escaped.contains(index));
            let Some(walked) = simply_quoted_composite_key(&text, line.len(), b',', &indexes, null, &mut out) else {
                assert!(!(intact && line.contains(&b'"') && !escaped_key), "{:?} {indexes:?}: left to the general reading", String::from_utf8_lossy(&line));
                left += 1;
                escaped_keys += (intact && escaped_key) as usize;
                continue;
            };
            let walked = walked.map(|present| (present, out));
            let mut general = Vec::new();
            let by_field = composite_key(&line, b',', &indexes, true, null, &mut Vec::new(), &mut general).map(|present| (present, general));
            assert_eq!(walked, by_field, "{:?} {indexes:?}", String::from_utf8_lossy(&line));
            match walked {
                Ok((true, _)) => keys += 1,
                Ok((false, _)) => nulls += 1,
                Err(_) => missing += 1,
            }
        }
        assert!(keys > 1000 && nulls > 1000 && missing > 1000 && left > 1000 && escaped_keys > 1000, "every outcome exercised: {keys}, {nulls}, {missing}, {left}, {escaped_keys}");
    }

    #[test]
    fn a_composite_key_resolves_each_field_and_refuses_one_named_twice() {
        let header = b"id,name,city\n";
        let key = Key::parse(&["city", "1"], true).unwrap();
        assert!(key.is_composite() && key.has_names() && key.indexes().is_none());
        assert_eq!(key.resolve(Some(header), b',', "f.csv").unwrap(), [2, 0]);
        let twice = Key::parse(&["id", "1"], true).unwrap().resolve(Some(header), b',', "f.csv").unwrap_err();
        assert!(twice.to_string().contains("field 1 is named twice"), "{twice}");
        assert_eq!(Key::parse(&["3", "2"], false).unwrap().indexes(), Some(vec![2, 1]));
        assert!(Key::parse::<&str>(&[], true).is_err());
    }

    /// A key field written as the NULL text, unquoted, has no value; quoted, it is text. A
    /// composite key with one NULL field has none either, and a short record is still malformed.
    #[test]
    fn a_field_written_as_the_null_text_is_null_unless_quoted() {
        let read = |line: &str, index: usize, null: Option<&str>| {
            let mut scratch = Vec::new();
            let quoted = line.contains('"');
            key_or_null(line.as_bytes(), b',', index, quoted, null.map(str::as_bytes), &mut scratch).map(|k| k.map(|k| String::from_utf8(k.to_vec()).unwrap()))
        };
        let text = |s: &str| Ok(Some(s.to_string()));
        assert_eq!(read("1,,x", 1, Some("")), Ok(None));
        assert_eq!(read("1,,x", 1, None), text(""), "without a null text, an empty field is the empty key");
        assert_eq!(read("1,\\N,x", 1, Some("\\N")), Ok(None));
        assert_eq!(read("1,\\N,x", 1, Some("")), text("\\N"));
        assert_eq!(read("1,\\Nx,x", 1, Some("\\N")), text("\\Nx"));
        assert_eq!(read("1,\"\",x", 1, Some("")), text(""), "a quoted empty field is text");
        assert_eq!(read("1,\"\\N\",x", 1, Some("\\N")), text("\\N"));
        assert_eq!(read("\"a,b\",,x", 1, Some("")), Ok(None), "an unquoted field of a line with quotes");
        assert_eq!(read("\"a,b\",\"say \"\"hi\"\"\"", 1, Some("")), text("say \"hi\""));
        assert_eq!(read("1,", 2, Some("")), Err(KeyError::MissingField { fields: 2 }));

        let composite = |line: &[u8], null: &[u8]| {
            let (mut scratch, mut out) = (Vec::new(), Vec::new());
            composite_key(line, b',', &[1, 2], line.contains(&b'"'), Some(null), &mut scratch, &mut out).map(|present| present.then_some(out))
        };
        assert_eq!(composite(b"1,a,b", b"").unwrap(), Some(b"\x01a\x01b".to_vec()));
        assert_eq!(composite(b"1,a,", b"").unwrap(), None);
        assert_eq!(composite(b"1,,b", b"").unwrap(), None);
        assert_eq!(composite(b"1,\"\",b", b"").unwrap(), Some(b"\x00\x01b".to_vec()));
        assert_eq!(composite(b"1,", b""), Err((2, KeyError::MissingField { fields: 2 })), "a NULL before a missing field");
    }

    /// Hadoop's `WritableUtils.writeVLong`, worked by hand from its source for each branch: one
    /// byte, positive and negative lengths of one to eight bytes.
    #[test]
    fn hadoop_vints_are_written_as_writable_utils_writes_them() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x00]),
            (127, &[0x7f]),
            (-112, &[0x90]),
            (128, &[0x8f, 0x80]),
            (255, &[0x8f, 0xff]),
            (256, &[0x8e, 0x01, 0x00]),
            (-113, &[0x87, 0x70]),
            (-257, &[0x86, 0x01, 0x00]),
            (i32::MAX as i64, &[0x8c, 0x7f, 0xff, 0xff, 0xff]),
            (i64::MAX, &[0x88, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            (i64::MIN, &[0x80, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        ];
        for &(value, want) in cases {
            let mut out = Vec::new();
            push_hadoop_vint(value, &mut out);
            assert_eq!(out, want, "{value}");
        }
    }

    /// Each key type's bytes: Spark's little-endian long, and the Writables' serializations.
    #[test]
    fn keys_are_encoded_as_their_type_serializes_them() {
        let encode = |key_type: KeyType, key: &[u8]| KeyRules { key_type, reject_empty: true }.encode(key, &mut Vec::new()).map(<[u8]>::to_vec);
        assert_eq!(encode(KeyType::Bytes, b"abc"), Ok(b"abc".to_vec()));
        assert_eq!(encode(KeyType::Long, b"-2"), Ok((-2i64).to_le_bytes().to_vec()));
        assert_eq!(encode(KeyType::LongWritable, b"258"), Ok(vec![0, 0, 0, 0, 0, 0, 1, 2]));
        assert_eq!(encode(KeyType::IntWritable, b"-1"), Ok(vec![0xff; 4]));
        assert_eq!(encode(KeyType::Text, b"abc"), Ok(b"\x03abc".to_vec()));
        assert_eq!(encode(KeyType::BytesWritable, b"abc"), Ok(b"\0\0\0\x03abc".to_vec()));
        let long_text = vec![b'x'; 200];
        assert_eq!(encode(KeyType::Text, &long_text).unwrap()[..3], [0x8f, 200, b'x']);
        // Hadoop refuses an empty key, not an empty Text (its length byte is hashed).
        assert_eq!(encode(KeyType::Bytes, b""), Err(KeyError::Empty));
        assert_eq!(encode(KeyType::Text, b""), Ok(vec![0]));
        // A number out of the type's range, or not a number, is named with the type.
        let not = |key: &str, key_type| Err(KeyError::NotANumber { key: key.into(), key_type });
        assert_eq!(encode(KeyType::IntWritable, b"2147483648"), not("2147483648", KeyType::IntWritable));
        assert_eq!(encode(KeyType::LongWritable, b"1e3"), not("1e3", KeyType::LongWritable));
        assert!(KeyError::NotANumber { key: "x".into(), key_type: KeyType::IntWritable }.describe(0).contains("32-bit decimal integer (--key-type int-writable)"));
    }
}
