//! Reading a GGUF file's header: the metadata lector needs, typed, with errors naming the key.

use crate::error::{io_err, Error, Result};
use candle_core::quantized::gguf_file::{Content, Value};
use std::fs::File;
use std::path::{Path, PathBuf};

/// A parsed GGUF header (metadata and tensor directory) and the file it came from.
pub struct Gguf {
    pub path: PathBuf,
    pub content: Content,
}

impl Gguf {
    /// Reads the header of `path` (the tensors stay on disk).
    pub fn open(path: &Path) -> Result<Self> {
        let mut file = File::open(path).map_err(io_err(path))?;
        let content = Content::read(&mut file).map_err(|e| Error::Gguf {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(Gguf {
            path: path.to_path_buf(),
            content,
        })
    }

    /// An error about this file.
    pub fn error(&self, message: impl Into<String>) -> Error {
        Error::Gguf {
            path: self.path.clone(),
            message: message.into(),
        }
    }

    /// The raw metadata value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(key)
    }

    fn require(&self, key: &str) -> Result<&Value> {
        self.get(key)
            .ok_or_else(|| self.error(format!("no `{key}` in the metadata")))
    }

    fn typed<T>(&self, key: &str, value: candle_core::Result<T>) -> Result<T> {
        value.map_err(|e| self.error(format!("`{key}`: {e}")))
    }

    /// The string value of `key`.
    pub fn string(&self, key: &str) -> Result<&str> {
        let value = self.require(key)?;
        self.typed(key, value.to_string()).map(String::as_str)
    }

    /// The string value of `key`, or `None` when absent.
    pub fn opt_string(&self, key: &str) -> Result<Option<&str>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => self.typed(key, v.to_string()).map(|s| Some(s.as_str())),
        }
    }

    /// The unsigned integer value of `key` (any integer width).
    pub fn uint(&self, key: &str) -> Result<u64> {
        let value = self.require(key)?;
        let n = match value {
            Value::U8(v) => u64::from(*v),
            Value::U16(v) => u64::from(*v),
            Value::U32(v) => u64::from(*v),
            Value::U64(v) => *v,
            Value::I8(v) => u64::try_from(*v).unwrap_or(u64::MAX),
            Value::I16(v) => u64::try_from(*v).unwrap_or(u64::MAX),
            Value::I32(v) => u64::try_from(*v).unwrap_or(u64::MAX),
            Value::I64(v) => u64::try_from(*v).unwrap_or(u64::MAX),
            other => {
                return Err(self.error(format!(
                    "`{key}`: expected an integer, found {:?}",
                    other.value_type()
                )))
            }
        };
        if n == u64::MAX {
            return Err(self.error(format!("`{key}` is negative")));
        }
        Ok(n)
    }

    /// The unsigned value of `key`, or `None` when absent.
    pub fn opt_uint(&self, key: &str) -> Result<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.uint(key).map(Some),
        }
    }

    /// The float value of `key`, or `default` when absent.
    pub fn float_or(&self, key: &str, default: f32) -> Result<f32> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::F64(v)) => Ok(*v as f32),
            Some(v) => self.typed(key, v.to_f32()),
        }
    }

    /// The boolean value of `key`, or `None` when absent.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => self.typed(key, v.to_bool()).map(Some),
        }
    }

    /// The array value of `key`.
    pub fn array(&self, key: &str) -> Result<&[Value]> {
        let value = self.require(key)?;
        self.typed(key, value.to_vec()).map(Vec::as_slice)
    }

    /// The array of strings of `key`.
    pub fn strings(&self, key: &str) -> Result<Vec<&str>> {
        self.array(key)?
            .iter()
            .map(|v| self.typed(key, v.to_string()).map(String::as_str))
            .collect()
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str> {
        self.string("general.architecture")
    }

    /// The model's name (`general.name`), else the file name.
    pub fn name(&self) -> String {
        self.opt_string("general.name")
            .ok()
            .flatten()
            .map(str::to_string)
            .unwrap_or_else(|| {
                self.path
                    .file_stem()
                    .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
            })
    }
}
