//! The byte encoding of segment files: LEB128 varints and length-prefixed UTF-8 strings.

/// Appends values to a byte buffer.
#[derive(Default)]
pub(crate) struct Encoder {
    pub bytes: Vec<u8>,
}

impl Encoder {
    pub fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.bytes.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.bytes.push(value as u8);
    }

    pub fn str(&mut self, s: &str) {
        self.varint(s.len() as u64);
        self.bytes.extend_from_slice(s.as_bytes());
    }

    /// `None` is a 0 byte; `Some(s)` a 1 byte then the string.
    pub fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.bytes.push(0),
            Some(s) => {
                self.bytes.push(1);
                self.str(s);
            }
        }
    }

    pub fn raw(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }
}

/// Reads values back; every read checks bounds so a damaged file is an error, never a panic.
pub(crate) struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// A decoding failure: what was being read and where.
pub(crate) type DecodeResult<T> = std::result::Result<T, String>;

impl<'a> Decoder<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Decoder { bytes, pos: 0 }
    }

    pub fn is_done(&self) -> bool {
        self.pos == self.bytes.len()
    }

    fn fail<T>(&self, what: &str) -> DecodeResult<T> {
        Err(format!("truncated or invalid {what} at byte {}", self.pos))
    }

    pub fn varint(&mut self) -> DecodeResult<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.bytes.get(self.pos) else {
                return self.fail("number");
            };
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        self.fail("number")
    }

    /// A varint that must fit a `u32`.
    pub fn u32(&mut self) -> DecodeResult<u32> {
        let v = self.varint()?;
        u32::try_from(v).or_else(|_| self.fail("32-bit number"))
    }

    pub fn raw(&mut self, len: usize) -> DecodeResult<&'a [u8]> {
        let end = self.pos.checked_add(len).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return self.fail("bytes");
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub fn str(&mut self) -> DecodeResult<String> {
        let len = usize::try_from(self.varint()?).or_else(|_| self.fail("string length"))?;
        let raw = self.raw(len)?;
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => self.fail("string"),
        }
    }

    pub fn opt_str(&mut self) -> DecodeResult<Option<String>> {
        match self.raw(1)?[0] {
            0 => Ok(None),
            1 => self.str().map(Some),
            _ => self.fail("optional string"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_truncation() {
        let mut e = Encoder::default();
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            e.varint(v);
        }
        e.str("héllo");
        e.opt_str(None);
        e.opt_str(Some(""));
        let mut d = Decoder::new(&e.bytes);
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(d.varint().unwrap(), v);
        }
        assert_eq!(d.str().unwrap(), "héllo");
        assert_eq!(d.opt_str().unwrap(), None);
        assert_eq!(d.opt_str().unwrap(), Some(String::new()));
        assert!(d.is_done());
        let cut = &e.bytes[..e.bytes.len() - 3];
        let mut d = Decoder::new(cut);
        let mut read_all = || -> DecodeResult<()> {
            for _ in 0..7 {
                d.varint()?;
            }
            d.str()?;
            d.opt_str()?;
            d.opt_str()?;
            Ok(())
        };
        assert!(read_all().is_err());
    }
}
