//! Checked parsers for numeric options: a value that cannot work is refused when the arguments are
//! parsed, with the option's name, instead of panicking or silently refusing everything later.

/// Longest timeout an option accepts, in seconds (one day): beyond it a timeout is a mistake, and
/// far beyond it (1e20) the duration no longer fits.
pub const MAX_SECONDS: f64 = 86_400.0;

/// Largest size in megabytes an option accepts (4 GiB).
pub const MAX_MEGABYTES: f64 = 4096.0;

fn number(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!("`{text}` is not a finite number"))
    }
}

/// A duration in seconds: positive, at most [`MAX_SECONDS`].
pub fn seconds(text: &str) -> Result<f64, String> {
    let value = number(text)?;
    if value > 0.0 && value <= MAX_SECONDS {
        Ok(value)
    } else {
        Err(format!(
            "must be more than 0 and at most {MAX_SECONDS} seconds"
        ))
    }
}

/// A size in megabytes: positive, at most [`MAX_MEGABYTES`].
pub fn megabytes(text: &str) -> Result<f64, String> {
    let value = number(text)?;
    if value > 0.0 && value <= MAX_MEGABYTES {
        Ok(value)
    } else {
        Err(format!(
            "must be more than 0 and at most {MAX_MEGABYTES} MB"
        ))
    }
}

/// A finite number at least 0.
pub fn non_negative(text: &str) -> Result<f64, String> {
    let value = number(text)?;
    if value >= 0.0 {
        Ok(value)
    } else {
        Err("must not be negative".into())
    }
}

/// A number from 0 to 1.
pub fn unit_interval(text: &str) -> Result<f64, String> {
    let value = number(text)?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err("must be between 0 and 1".into())
    }
}

/// A count of at least 1.
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{text}` is not a whole number of at least 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_cannot_work() {
        assert!(seconds("1e20").is_err());
        assert!(seconds("NaN").is_err());
        assert!(seconds("0").is_err());
        assert_eq!(seconds("2.5"), Ok(2.5));
        assert!(megabytes("-1").is_err());
        assert!(megabytes("inf").is_err());
        assert_eq!(megabytes("128"), Ok(128.0));
        assert!(at_least_one("0").is_err());
        assert!(at_least_one("-3").is_err());
        assert_eq!(at_least_one("5"), Ok(5));
        assert!(unit_interval("1.5").is_err());
        assert!(non_negative("-0.1").is_err());
    }
}
