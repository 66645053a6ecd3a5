//! Hadoop's block framing, which its SnappyCodec and Lz4Codec write around raw Snappy and LZ4
//! blocks (`BlockCompressorStream` / `BlockDecompressorStream` in hadoop-common): neither
//! codec's own framing format, so `snzip` or `lz4 -d` cannot read these files, and text files
//! written by Hadoop, Hive or Spark with those codecs (`part-r-00000.snappy`, `000000_0.lz4`)
//! can only be read by knowing it.
//!
//! A file is a series of blocks, each
//!
//! ```text
//! u32 BE   uncompressed length of the block
//! then, until that many bytes are decoded:
//!   u32 BE   compressed length of a chunk
//!   bytes    the chunk: one raw Snappy or LZ4 block
//! ```
//!
//! Hadoop decodes each chunk into a buffer of `io.compression.codec.*.buffersize` (256 KiB by
//! default), so the writer here cuts its blocks as Hadoop's own writer does at the default
//! buffer size: one chunk per block, at most [`BlockCodec::max_block`] bytes of text.

use std::io::{self, BufRead, Read, Write};

/// The raw block format inside Hadoop's framing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockCodec {
    Snappy,
    Lz4,
}

/// The most text one chunk may decode to here: LZ4 chunks carry no length of their own, so
/// the output buffer is the smaller of this and what the block has left. Hadoop's chunks are at
/// most its buffer size, 256 KiB unless configured otherwise.
const MAX_CHUNK_TEXT: usize = 64 << 20;

impl BlockCodec {
    /// The most text a block holds as Hadoop writes it with its default 256 KiB buffer: the
    /// buffer less the codec's worst-case expansion (`SnappyCodec`: buffer / 6 + 32,
    /// `Lz4Codec`: buffer / 255 + 16), so that a chunk fits the reader's buffer.
    pub fn max_block(self) -> usize {
        const BUFFER: usize = 256 * 1024;
        match self {
            BlockCodec::Snappy => BUFFER - (BUFFER / 6 + 32),
            BlockCodec::Lz4 => BUFFER - (BUFFER / 255 + 16),
        }
    }

    /// For messages: "Snappy" or "LZ4".
    pub fn name(self) -> &'static str {
        match self {
            BlockCodec::Snappy => "Snappy",
            BlockCodec::Lz4 => "LZ4",
        }
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Reads the text of a Hadoop block-framed stream.
pub struct HadoopBlockReader<R: BufRead> {
    inner: R,
    codec: BlockCodec,
    /// Decoded text of the current chunk: `text[taken..filled]` is still to be read.
    text: Vec<u8>,
    taken: usize,
    filled: usize,
    /// Text the current block has yet to decode into.
    block_left: u64,
    chunk: Vec<u8>,
    snappy: snap::raw::Decoder,
    /// Whether the stream's first bytes were checked for the codecs' other formats.
    checked: bool,
}

/// The first bytes of the Snappy framing format (`snzip`, python-snappy's streams) and of the
/// LZ4 frame format (the `lz4` tool): files commonly named `.snappy` and `.lz4` too, which
/// Hadoop's codecs cannot read (`compressed` reads them with those formats' own decoders).
pub const SNAPPY_FRAMED: &[u8] = b"\xff\x06\x00\x00sNaPpY";
pub const LZ4_FRAME: &[u8] = &[0x04, 0x22, 0x4d, 0x18];

impl<R: BufRead> HadoopBlockReader<R> {
    pub fn new(inner: R, codec: BlockCodec) -> Self {
        HadoopBlockReader {
            inner,
            codec,
            text: Vec::new(),
            taken: 0,
            filled: 0,
            block_left: 0,
            chunk: Vec::new(),
            snappy: snap::raw::Decoder::new(),
            checked: false,
        }
    }

    /// Refuses a stream in the codec's own framing, which reads as Hadoop's only as garbage.
    fn check_format(&mut self) -> io::Result<()> {
        self.checked = true;
        let start = self.inner.fill_buf()?;
        let (magic, format, tool) = match self.codec {
            BlockCodec::Snappy => (SNAPPY_FRAMED, "the Snappy framing format", "snzip -d or python -m snappy -d"),
            BlockCodec::Lz4 => (LZ4_FRAME, "the LZ4 frame format", "lz4 -d"),
        };
        if start.starts_with(magic) {
            return Err(io::Error::new(io::ErrorKind::Unsupported, format!(
                "this is {format}, not Hadoop's {} block framing: decompress it first ({tool})",
                self.codec.name()
            )));
        }
        Ok(())
    }

    /// The underlying reader (its buffered bytes are compressed bytes not yet decoded).
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// A big-endian u32, or `None` at the end of the stream before its first byte.
    fn read_u32(&mut self) -> io::Result<Option<u32>> {
        let mut bytes = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match self.inner.read(&mut bytes[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ends inside a length")),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Some(u32::from_be_bytes(bytes)))
    }

    /// Decodes the next chunk into `text`; false at the end of the stream (between blocks).
    fn next_chunk(&mut self) -> io::Result<bool> {
        if !self.checked {
            self.check_format()?;
        }
        while self.block_left == 0 {
            match self.read_u32()? {
                None => return Ok(false),
                Some(length) => self.block_left = length as u64,
            }
        }
        let truncated = |left: u64| io::Error::new(io::ErrorKind::UnexpectedEof, format!("the stream ends with {left} bytes of its last block not decoded"));
        let Some(chunk_len) = self.read_u32()? else { return Err(truncated(self.block_left)) };
        self.chunk.clear();
        // Read as the bytes come, not allocated up front: a corrupt length asks for up to 4 GiB.
        (&mut self.inner).take(chunk_len as u64).read_to_end(&mut self.chunk)?;
        if self.chunk.len() < chunk_len as usize {
            return Err(truncated(self.block_left));
        }
        let room = self.block_left.min(MAX_CHUNK_TEXT as u64) as usize;
        let decoded = match self.codec {
            BlockCodec::Snappy => {
                let len = snap::raw::decompress_len(&self.chunk).map_err(|e| invalid(format!("a Snappy chunk: {e}")))?;
                if len > room {
                    return Err(invalid(format!("a Snappy chunk of {len} bytes overruns its block ({} bytes left)", self.block_left)));
                }
                self.ensure_text(len);
                self.snappy.decompress(&self.chunk, &mut self.text[..len]).map_err(|e| invalid(format!("a Snappy chunk: {e}")))?
            }
            BlockCodec::Lz4 => {
                self.ensure_text(room);
                lz4_flex::block::decompress_into(&self.chunk, &mut self.text[..room])
                    .map_err(|e| invalid(format!("an LZ4 chunk: {e} (with {} bytes left in its block)", self.block_left)))?
            }
        };
        self.block_left -= decoded as u64;
        (self.taken, self.filled) = (0, decoded);
        Ok(true)
    }

    /// Makes `text` at least `len` bytes long (zeroed once, then reused).
    fn ensure_text(&mut self, len: usize) {
        if self.text.len() < len {
            self.text.resize(len, 0);
        }
    }
}

impl<R: BufRead> Read for HadoopBlockReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.taken == self.filled {
            if !self.next_chunk()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.filled - self.taken);
        buf[..n].copy_from_slice(&self.text[self.taken..self.taken + n]);
        self.taken += n;
        Ok(n)
    }
}

/// Writes text in Hadoop's block framing, as its SnappyCodec or Lz4Codec would: blocks of at
/// most [`BlockCodec::max_block`] bytes of text, one chunk each.
pub struct HadoopBlockWriter<W: Write> {
    inner: W,
    codec: BlockCodec,
    text: Vec<u8>,
    compressed: Vec<u8>,
    snappy: snap::raw::Encoder,
}

impl<W: Write> HadoopBlockWriter<W> {
    pub fn new(inner: W, codec: BlockCodec) -> Self {
        HadoopBlockWriter { inner, codec, text: Vec::with_capacity(codec.max_block()), compressed: Vec::new(), snappy: snap::raw::Encoder::new() }
    }

    /// Writes the last block and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.write_block()?;
        Ok(self.inner)
    }

    fn write_block(&mut self) -> io::Result<()> {
        if self.text.is_empty() {
            return Ok(());
        }
        let len = match self.codec {
            BlockCodec::Snappy => {
                self.compressed.resize(snap::raw::max_compress_len(self.text.len()), 0);
                self.snappy.compress(&self.text, &mut self.compressed).map_err(|e| invalid(format!("Snappy: {e}")))?
            }
            BlockCodec::Lz4 => {
                self.compressed.resize(lz4_flex::block::get_maximum_output_size(self.text.len()), 0);
                lz4_flex::block::compress_into(&self.text, &mut self.compressed).map_err(|e| invalid(format!("LZ4: {e}")))?
            }
        };
        self.inner.write_all(&(self.text.len() as u32).to_be_bytes())?;
        self.inner.write_all(&(len as u32).to_be_bytes())?;
        self.inner.write_all(&self.compressed[..len])?;
        self.text.clear();
        Ok(())
    }
}

impl<W: Write> Write for HadoopBlockWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(self.codec.max_block() - self.text.len());
        self.text.extend_from_slice(&buf[..n]);
        if self.text.len() == self.codec.max_block() {
            self.write_block()?;
        }
        Ok(n)
    }

    /// Flushes what is written through; the block being filled stays (a block is written
    /// whole).
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODECS: [BlockCodec; 2] = [BlockCodec::Snappy, BlockCodec::Lz4];

    fn text(len: usize) -> Vec<u8> {
        (0..len).map(|i| format!("{},customer-{}\n", i, i % 977)).flat_map(String::into_bytes).take(len).collect()
    }

    fn framed(codec: BlockCodec, text: &[u8]) -> Vec<u8> {
        let mut w = HadoopBlockWriter::new(Vec::new(), codec);
        w.write_all(text).unwrap();
        w.finish().unwrap()
    }

    fn unframed(codec: BlockCodec, bytes: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        HadoopBlockReader::new(bytes, codec).read_to_end(&mut out)?;
        Ok(out)
    }

    /// Text of every size, from none to several blocks, reads back as written, and the blocks
    /// are Hadoop's size.
    #[test]
    fn text_reads_back_through_the_framing() {
        for codec in CODECS {
            for len in [0, 1, 100, codec.max_block() - 1, codec.max_block(), codec.max_block() + 1, 3 * codec.max_block() + 17] {
                let t = text(len);
                let bytes = framed(codec, &t);
                assert!(unframed(codec, &bytes).unwrap() == t, "{codec:?} {len}");
                if len > 0 {
                    let first = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
                    assert_eq!(first, len.min(codec.max_block()), "{codec:?} {len}: the first block's length");
                }
            }
        }
    }

    /// A block may hold several chunks (Hadoop's writer cuts a write larger than its buffer so),
    /// and a block of no text (what Hadoop writes for an empty part) holds none.
    #[test]
    fn blocks_of_several_chunks_and_empty_blocks_are_read() {
        for codec in CODECS {
            let parts: [&[u8]; 3] = [b"id,name\n1,al", b"ice\n2,bob\n", b"3,carol\n"];
            let compress = |p: &[u8]| match codec {
                BlockCodec::Snappy => snap::raw::Encoder::new().compress_vec(p).unwrap(),
                BlockCodec::Lz4 => lz4_flex::block::compress(p),
            };
            let mut bytes = 0u32.to_be_bytes().to_vec();
            bytes.extend((parts.iter().map(|p| p.len()).sum::<usize>() as u32).to_be_bytes());
            for p in parts {
                let c = compress(p);
                bytes.extend((c.len() as u32).to_be_bytes());
                bytes.extend(c);
            }
            bytes.extend(0u32.to_be_bytes());
            assert_eq!(unframed(codec, &bytes).unwrap(), parts.concat(), "{codec:?}");
        }
    }

    /// A stream cut anywhere inside a block, or whose chunk is corrupt or decodes past its
    /// block, is an error, never a short text.
    #[test]
    fn truncated_and_corrupt_streams_fail() {
        for codec in CODECS {
            let t = text(5000);
            let bytes = framed(codec, &t);
            for cut in [1, 3, 4, 5, 8, 9, bytes.len() / 2, bytes.len() - 1] {
                assert!(unframed(codec, &bytes[..cut]).is_err(), "{codec:?} cut at {cut}");
            }
            // The block says it holds less text than its chunk decodes to.
            let mut short = bytes.clone();
            short[..4].copy_from_slice(&4000u32.to_be_bytes());
            assert!(unframed(codec, &short).is_err(), "{codec:?}: a chunk past its block");
            // Garbage for a chunk.
            let mut garbage = bytes.clone();
            for b in &mut garbage[8..40] {
                *b = 0xff;
            }
            assert!(unframed(codec, &garbage).is_err(), "{codec:?}: a corrupt chunk");
        }
    }

    /// A file in the codec's own framing (snzip's, the lz4 tool's) is refused, saying so.
    #[test]
    fn the_codecs_own_framings_are_refused_by_name() {
        let snzip = [SNAPPY_FRAMED, b"\x01\x09\x00\x00abcdhello"].concat();
        let e = unframed(BlockCodec::Snappy, &snzip).unwrap_err().to_string();
        assert!(e.contains("the Snappy framing format") && e.contains("snzip -d"), "{e}");
        let lz4_tool = [LZ4_FRAME, &[0x64, 0x40, 0xa7, 0, 0, 0, 0]].concat();
        let e = unframed(BlockCodec::Lz4, &lz4_tool).unwrap_err().to_string();
        assert!(e.contains("the LZ4 frame format") && e.contains("lz4 -d"), "{e}");
    }

    proptest::proptest! {
        /// Any bytes read to their end or to an error, never a panic; with a valid block header
        /// in front too, so that the chunk decoders see them.
        #[test]
        fn any_bytes_read_or_fail(bytes in proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..600), text_len in 0u32..5000) {
            let mut framed = text_len.to_be_bytes().to_vec();
            framed.extend((bytes.len() as u32).to_be_bytes());
            framed.extend(&bytes);
            for codec in CODECS {
                let _ = unframed(codec, &bytes);
                let _ = unframed(codec, &framed);
            }
        }

        /// Any text, written in any pieces, reads back whole.
        #[test]
        fn any_text_reads_back(text in proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..3000), cut in 0usize..3000) {
            for codec in CODECS {
                let mut w = HadoopBlockWriter::new(Vec::new(), codec);
                let cut = cut.min(text.len());
                w.write_all(&text[..cut]).unwrap();
                w.write_all(&text[cut..]).unwrap();
                let bytes = w.finish().unwrap();
                proptest::prop_assert_eq!(unframed(codec, &bytes).unwrap(), text.clone());
            }
        }
    }
}
