//! The one gateway into the engine, and the map from engine errors to the
//! Python exception classes defined in `cubeslab/errors.py`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use cubeslab_core::{Error, ErrorKind};
use pyo3::{prelude::*, types::PyString};

/// Run `f` with the GIL released; map its error or panic to a Python exception.
pub fn engine<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, Error> + Send) -> PyResult<T> {
    match py.detach(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(to_python(py, &error)),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(raise(
                py,
                "InternalError",
                &format!("internal error (please report): {message}"),
            ))
        }
    }
}

/// An `InvalidInputError` (a `ValueError` too) for a value the binding cannot convert.
pub fn invalid_input(message: impl AsRef<str>) -> PyErr {
    Python::attach(|py| raise(py, "InvalidInputError", message.as_ref()))
}

/// An `OptionError` (an `InvalidInputError`): an option's value the
/// engine cannot use, a usage error at the command line.
pub fn option_error(message: impl AsRef<str>) -> PyErr {
    Python::attach(|py| raise(py, "OptionError", message.as_ref()))
}

/// The Python class each kind of engine error is raised as, for the test
/// that every one exists.
#[pyfunction]
pub fn error_classes() -> Vec<&'static str> {
    ErrorKind::ALL.iter().map(|&k| class_name(k)).collect()
}

fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidInput => "InvalidInputError",
        ErrorKind::Geometry => "GeometryError",
        ErrorKind::NotFound => "StoreNotFoundError",
        ErrorKind::AlreadyExists => "StoreExistsError",
        ErrorKind::Incomplete => "IncompleteStoreError",
        ErrorKind::Busy => "StoreBusyError",
        ErrorKind::Changed => "StoreChangedError",
        ErrorKind::Corrupt => "CorruptDataError",
        ErrorKind::Selection => "SelectionError",
        ErrorKind::Io | ErrorKind::Interrupted => "CubeslabIOError",
    }
}

fn to_python(py: Python<'_>, error: &Error) -> PyErr {
    if error.kind() == ErrorKind::Interrupted {
        // Only a stop request (Ctrl-C, through a Progress) interrupts the engine.
        return pyo3::exceptions::PyKeyboardInterrupt::new_err(error.to_string());
    }
    raise(py, class_name(error.kind()), &error.to_string())
}

fn raise(py: Python<'_>, class: &str, message: &str) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = py.import("cubeslab.errors")?.getattr(class)?;
        Ok(PyErr::from_value(cls.call1((PyString::new(py, message),))?))
    };
    build().unwrap_or_else(|e| e)
}
