//! lector-py: the extension module `lector._lector` behind the Python package `lector`.
//!
//! Bindings only translate: Python values in, a call into the library crates with the GIL
//! released, the result out as Python dicts and lists (the same fields as the CLI's `--json`).
//! The typed, documented face (dataclasses, stubs, the Haystack and LangChain components) is the
//! Python code in `python/lector/`. Every Rust error becomes `lector.LectorError` with the
//! error's message and its causes.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod calibrate;
mod embedder;
mod eval;
mod generate;
mod index;
mod pipeline;
mod querylog;
mod reader;
mod train;

create_exception!(
    _lector,
    LectorError,
    PyException,
    "An error from lector, with its message and causes."
);

/// `err` as a `LectorError` whose message is the error followed by its causes.
pub(crate) fn lector_error(err: &(dyn std::error::Error + 'static)) -> PyErr {
    let mut message = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        let text = inner.to_string();
        // Many errors already print their cause; say each thing once.
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = inner.source();
    }
    LectorError::new_err(message)
}

/// A library's verdict on a caller's options (`lector_pipeline::Error::Options`,
/// `lector_reader::Error::Params`) as the `ValueError` Python code expects for a bad argument.
pub(crate) fn bad_argument(err: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(err.to_string())
}

/// Converts a library result into a Python one.
pub(crate) trait OrRaise<T> {
    fn or_raise(self) -> PyResult<T>;
}

impl<T, E: std::error::Error + 'static> OrRaise<T> for Result<T, E> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(|e| lector_error(&e))
    }
}

/// A JSON value as the Python value `json.loads` would give.
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(fields) => {
            let dict = PyDict::new(py);
            for (key, item) in fields {
                dict.set_item(key, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// Anything serializable as the Python value of its JSON.
pub(crate) fn serialized<'py, T: serde::Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &serde_json::to_value(value).or_raise()?)
}

/// The deepest a value passed from Python may nest: room for a document around metadata deeper
/// than [`lector_ingest::MAX_METADATA_DEPTH`], which the document check then refuses by name.
/// A cyclic dict or list stops here rather than exhausting the stack.
const MAX_DEPTH: usize = lector_ingest::MAX_METADATA_DEPTH + 8;

/// A Python value made of dicts (string keys), lists, tuples, strings, numbers, booleans and None
/// as JSON; `at` names the argument in errors (`metadata["year"]`).
pub(crate) fn from_py(obj: &Bound<'_, PyAny>, at: &str) -> PyResult<Value> {
    from_py_nested(obj, at, 0).map_err(|err| match err {
        Nested::TooDeep => PyValueError::new_err(format!(
            "{at}: nested more than {} levels deep (or cyclic)",
            lector_ingest::MAX_METADATA_DEPTH
        )),
        Nested::Python(err) => err,
    })
}

/// Why a nested value was not converted: too deep (said once, for the whole value) or a
/// Python error naming where.
enum Nested {
    TooDeep,
    Python(PyErr),
}

impl From<PyErr> for Nested {
    fn from(err: PyErr) -> Self {
        Nested::Python(err)
    }
}

fn from_py_nested(obj: &Bound<'_, PyAny>, at: &str, depth: usize) -> Result<Value, Nested> {
    if depth > MAX_DEPTH {
        return Err(Nested::TooDeep);
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        return match obj.extract::<i64>() {
            Ok(i) => Ok(Value::from(i)),
            Err(_) => Ok(Value::from(obj.extract::<u64>().map_err(|_| {
                PyValueError::new_err(format!("{at}: the integer does not fit in 64 bits"))
            })?)),
        };
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| {
                Nested::Python(PyValueError::new_err(format!(
                    "{at}: {} is not a JSON number",
                    f.value()
                )))
            });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut fields = Map::new();
        for (key, item) in dict.iter() {
            let key: String = key.extract().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!("{at}: keys must be strings"))
            })?;
            let value = from_py_nested(&item, &format!("{at}[{key:?}]"), depth + 1)?;
            fields.insert(key, value);
        }
        return Ok(Value::Object(fields));
    }
    if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
        let items = obj
            .try_iter()?
            .enumerate()
            .map(|(i, item)| from_py_nested(&item?, &format!("{at}[{i}]"), depth + 1))
            .collect::<Result<Vec<_>, Nested>>()?;
        return Ok(Value::Array(items));
    }
    Err(Nested::Python(pyo3::exceptions::PyTypeError::new_err(
        format!(
            "{at}: expected a dict, list, str, number, bool or None, found {}",
            obj.get_type().name()?
        ),
    )))
}

#[pymodule]
fn _lector(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("LectorError", m.py().get_type::<LectorError>())?;
    m.add_class::<index::Index>()?;
    m.add_class::<reader::Reader>()?;
    m.add_class::<pipeline::Pipeline>()?;
    m.add_class::<embedder::Embedder>()?;
    m.add_class::<generate::Generator>()?;
    m.add_function(wrap_pyfunction!(calibrate::calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(eval::squad, m)?)?;
    m.add_function(wrap_pyfunction!(eval::odqa, m)?)?;
    m.add_function(wrap_pyfunction!(generate::generative, m)?)?;
    m.add_function(wrap_pyfunction!(generate::rag, m)?)?;
    m.add_function(wrap_pyfunction!(generate::generate_questions, m)?)?;
    m.add_function(wrap_pyfunction!(eval::adversarial, m)?)?;
    m.add_function(wrap_pyfunction!(eval::equivalence, m)?)?;
    m.add_function(wrap_pyfunction!(eval::compare, m)?)?;
    m.add_function(wrap_pyfunction!(eval::retrieval, m)?)?;
    m.add_function(wrap_pyfunction!(eval::retrieval_run, m)?)?;
    m.add_function(wrap_pyfunction!(eval::hotpot, m)?)?;
    m.add_function(wrap_pyfunction!(eval::hotpot_run, m)?)?;
    m.add_function(wrap_pyfunction!(eval::bertscore, m)?)?;
    m.add_function(wrap_pyfunction!(eval::judge, m)?)?;
    m.add_function(wrap_pyfunction!(eval::faithfulness, m)?)?;
    m.add_function(wrap_pyfunction!(eval::canary, m)?)?;
    m.add_function(wrap_pyfunction!(eval::rouge, m)?)?;
    m.add_function(wrap_pyfunction!(eval::shared_data, m)?)?;
    m.add_function(wrap_pyfunction!(querylog::read_log, m)?)?;
    m.add_function(wrap_pyfunction!(querylog::read_labels, m)?)?;
    m.add_function(wrap_pyfunction!(querylog::export_labels, m)?)?;
    m.add_function(wrap_pyfunction!(querylog::drift, m)?)?;
    m.add_function(wrap_pyfunction!(train::train_reader, m)?)?;
    m.add_function(wrap_pyfunction!(train::train_retriever, m)?)?;
    Ok(())
}
