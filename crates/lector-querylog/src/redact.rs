//! Masking of personal data in logged text (`--redact`): e-mail addresses, phone numbers and
//! runs of six or more digits (account, card, order and ID numbers). Names, street addresses
//! and anything else a question may hold are not recognised and stay as they are.

use regex::Regex;
use std::sync::OnceLock;

/// The mask of an e-mail address.
pub const EMAIL: &str = "[email]";
/// The mask of a phone number.
pub const PHONE: &str = "[phone]";
/// The mask of a long digit run.
pub const NUMBER: &str = "[number]";

/// Fewest digits in a phone number: 9 masks international and most national numbers but
/// leaves dates (`2026-12-02`, 8 digits) and years alone; 7-digit local numbers are missed.
const PHONE_DIGITS: usize = 9;

/// `text` with e-mail addresses, phone numbers and long digit runs masked, and whether
/// anything was masked.
pub fn redact(text: &str) -> (String, bool) {
    let emails = pattern(
        &EMAILS,
        r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
    );
    let phones = pattern(&PHONES, r"\+?\(?\d[\d \t().-]{5,}\d");
    let digits = pattern(&DIGITS, r"\d{6,}");
    // Long runs first, so an unbroken card or order number is a number, not a phone.
    let masked = emails.replace_all(text, EMAIL);
    let masked = digits.replace_all(&masked, NUMBER);
    let masked = phones.replace_all(&masked, |c: &regex::Captures| {
        let found = &c[0];
        if found.chars().filter(char::is_ascii_digit).count() >= PHONE_DIGITS {
            PHONE.to_string()
        } else {
            found.to_string()
        }
    });
    let masked = masked.into_owned();
    let changed = masked != text;
    (masked, changed)
}

static EMAILS: OnceLock<Regex> = OnceLock::new();
static PHONES: OnceLock<Regex> = OnceLock::new();
static DIGITS: OnceLock<Regex> = OnceLock::new();

fn pattern(cell: &'static OnceLock<Regex>, source: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(source).expect("a valid pattern"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_emails_phones_and_long_numbers_but_not_dates_or_years() {
        let cases = [
            (
                "mail jane.doe+qa@example.co.uk now",
                "mail [email] now",
                true,
            ),
            ("call +44 20 7946 0958 today", "call [phone] today", true),
            ("or (555) 123-4567?", "or [phone]?", true),
            ("order 123456789012 is late", "order [number] is late", true),
            ("card 4111 1111 1111 1111", "card [phone]", true),
            ("card 4111111111111111", "card [number]", true),
            ("ticket #884213", "ticket #[number]", true),
            (
                "Who won Super Bowl 50 in 2016?",
                "Who won Super Bowl 50 in 2016?",
                false,
            ),
            (
                "What happened on 2026-12-02?",
                "What happened on 2026-12-02?",
                false,
            ),
            ("population 1,234,567", "population 1,234,567", false),
            (
                "Café au lait ☕ at 10:30",
                "Café au lait ☕ at 10:30",
                false,
            ),
        ];
        for (text, want, changed) in cases {
            assert_eq!(redact(text), (want.to_string(), changed), "{text}");
        }
    }
}
