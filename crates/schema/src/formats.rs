//! String formats kube-apiserver validates for CRDs (k8s.io/kube-openapi's `strfmt.Default`
//! registry, restricted to the set apiextensions-apiserver supports). Formats outside the set
//! are ignored, exactly as kube-apiserver strips them before validating.

use std::net::Ipv6Addr;
use std::sync::OnceLock;

use regex::Regex;

/// The formats apiextensions-apiserver keeps (names normalized without `-`).
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// go-openapi's name normalization: `date-time` and `datetime` are the same format.
fn normalize(name: &str) -> String {
    name.replace('-', "")
}

/// Whether kube-apiserver validates strings of this format (otherwise the format is ignored).
pub(crate) fn is_supported(name: &str) -> bool {
    SUPPORTED.contains(&normalize(name).as_str())
}

/// Whether `s` is valid for a supported format; unsupported formats accept everything.
pub(crate) fn validates(name: &str, s: &str) -> bool {
    match normalize(name).as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(s),
        "email" => is_email(s),
        "hostname" => is_hostname(s),
        "ipv4" => parse_ip_sloppy(s).is_some() && s.contains('.'),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok() && s.contains(':'),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "uuid" => re(
            &UUID,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
        )
        .is_match(s),
        "uuid3" => re(
            &UUID3,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
        )
        .is_match(s),
        "uuid4" => re(
            &UUID4,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
        )
        .is_match(s),
        "uuid5" => re(
            &UUID5,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
        )
        .is_match(s),
        "isbn" => is_isbn(s, 10) || is_isbn(s, 13),
        "isbn10" => is_isbn(s, 10),
        "isbn13" => is_isbn(s, 13),
        "creditcard" => is_credit_card(s),
        "ssn" => s.len() == 11 && re(&SSN, r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$").is_match(s),
        "hexcolor" => re(&HEXCOLOR, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$").is_match(s),
        "rgbcolor" => re(&RGBCOLOR, RGB_PATTERN).is_match(s),
        "byte" => re(
            &BASE64,
            r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$",
        )
        .is_match(s),
        "date" => is_date(s),
        "duration" => is_duration(s),
        "datetime" => is_date_time(s),
        _ => true,
    }
}

static UUID: OnceLock<Regex> = OnceLock::new();
static UUID3: OnceLock<Regex> = OnceLock::new();
static UUID4: OnceLock<Regex> = OnceLock::new();
static UUID5: OnceLock<Regex> = OnceLock::new();
static SSN: OnceLock<Regex> = OnceLock::new();
static HEXCOLOR: OnceLock<Regex> = OnceLock::new();
static RGBCOLOR: OnceLock<Regex> = OnceLock::new();
static BASE64: OnceLock<Regex> = OnceLock::new();
static DATETIME: OnceLock<Regex> = OnceLock::new();
static HOSTNAME_CHAR: OnceLock<Regex> = OnceLock::new();
static DURATION_PART: OnceLock<Regex> = OnceLock::new();

// Go's `\s` is `[\t\n\f\r ]`.
const RGB_PATTERN: &str = r"^rgb\([\t\n\f\r ]*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])[\t\n\f\r ]*,[\t\n\f\r ]*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])[\t\n\f\r ]*,[\t\n\f\r ]*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])[\t\n\f\r ]*\)$";

/// A lazily compiled constant pattern. The patterns are literals known to compile; a failure
/// would make the format reject everything rather than panic.
fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).unwrap_or_else(|_| never_matches()))
}

fn never_matches() -> Regex {
    #[allow(clippy::unwrap_used)] // A literal that always compiles.
    Regex::new(r"[^\s\S]").unwrap()
}

/// kube-openapi's `HostnamePattern`, written out by hand: a single label (one optional dash
/// right after the first character), or dotted labels ending in a 2-63 letter top-level label;
/// at most 255 bytes and 63 bytes per label.
fn is_hostname(s: &str) -> bool {
    let x = |c: char| c.is_ascii_alphanumeric() || (!c.is_ascii() && hostname_unicode(c));
    let letter = |c: char| c.is_ascii_alphabetic() || (!c.is_ascii() && unicode_letter(c));
    let chars: Vec<char> = s.chars().collect();
    let single_label = || {
        let Some((&first, rest)) = chars.split_first() else {
            return false;
        };
        if !x(first) {
            return false;
        }
        let rest = if rest.first() == Some(&'-') {
            &rest[1..]
        } else {
            rest
        };
        rest.len() <= 62 && rest.iter().all(|&c| x(c))
    };
    let dotted = || {
        let Some(last_dot) = chars.iter().rposition(|&c| c == '.') else {
            return false;
        };
        let tld = &chars[last_dot + 1..];
        if !(2..=63).contains(&tld.len()) || !tld.iter().all(|&c| letter(c)) {
            return false;
        }
        chars[..last_dot].split(|&c| c == '.').all(|label| {
            let Some((&first, rest)) = label.split_first() else {
                return false;
            };
            if !x(first) {
                return false;
            }
            match rest.split_last() {
                None => true,
                Some((&last, middle)) => {
                    x(last) && middle.len() <= 61 && middle.iter().all(|&c| x(c) || c == '-')
                }
            }
        })
    };
    if !(single_label() || dotted()) {
        return false;
    }
    s.len() <= 255 && s.split('.').all(|p| p.len() <= 63)
}

/// `[\p{S}\p{L}]` for one non-ASCII character.
fn hostname_unicode(c: char) -> bool {
    let re = re(&HOSTNAME_CHAR, r"^[\p{S}\p{L}]$");
    let mut buf = [0u8; 4];
    re.is_match(c.encode_utf8(&mut buf))
}

fn unicode_letter(c: char) -> bool {
    static LETTER: OnceLock<Regex> = OnceLock::new();
    let mut buf = [0u8; 4];
    re(&LETTER, r"^\p{L}$").is_match(c.encode_utf8(&mut buf))
}

/// Go's `net/url.ParseRequestURI` accepting the string.
fn is_request_uri(s: &str) -> bool {
    if s.bytes().any(|b| b < 0x20 || b == 0x7f) || s.is_empty() {
        return false;
    }
    if s == "*" {
        return true;
    }
    let (scheme, rest) = split_scheme(s);
    let Some(scheme) = scheme else { return false };
    if !rest.starts_with('/') {
        // `mailto:x` is an opaque URI; a relative reference is not a request URI.
        return !scheme.is_empty();
    }
    let path = if !scheme.is_empty() && rest.starts_with("//") {
        let after = &rest[2..];
        let (authority, path) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        if !valid_authority(authority) {
            return false;
        }
        path
    } else {
        rest
    };
    valid_escapes(path)
}

/// Splits `scheme:rest`; `None` means a malformed scheme (`:` first).
fn split_scheme(s: &str) -> (Option<&str>, &str) {
    for (i, c) in s.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return (None, s),
            ':' => return (Some(&s[..i]), &s[i + 1..]),
            _ => return (Some(""), s),
        }
    }
    (Some(""), s)
}

fn valid_authority(authority: &str) -> bool {
    let (userinfo, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    if let Some(u) = userinfo {
        let ok = u
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c) || !c.is_ascii());
        if !ok || !valid_escapes(u) {
            return false;
        }
    }
    let (host, port) = if let Some(stripped) = host.strip_prefix('[') {
        let Some(end) = stripped.find(']') else {
            return false;
        };
        let after = &stripped[end + 1..];
        if !after.is_empty() && !after.starts_with(':') {
            return false;
        }
        (&stripped[..end], after.strip_prefix(':'))
    } else {
        match host.rfind(':') {
            Some(i) => (&host[..i], Some(&host[i + 1..])),
            None => (host, None),
        }
    };
    if let Some(port) = port
        && !port.bytes().all(|b| b.is_ascii_digit())
    {
        return false;
    }
    host.chars()
        .all(|c| !c.is_ascii() || c.is_ascii_alphanumeric() || "!$&'()*+,;=:[]<>\"-_.~%".contains(c))
        && valid_escapes(host)
}

/// Every `%` starts a two-hex-digit escape.
fn valid_escapes(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() || !(b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit()) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// An approximation of Go's `net/mail.ParseAddress`: `local@domain`, optionally as
/// `Display Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let s = s.trim();
    let addr = if let Some(open) = s.rfind('<') {
        let Some(inner) = s[open + 1..].strip_suffix('>') else {
            return false;
        };
        let name = s[..open].trim();
        if !name.is_empty() && !valid_display_name(name) {
            return false;
        }
        inner
    } else {
        s
    };
    let Some(at) = addr.rfind('@') else { return false };
    let (local, domain) = (&addr[..at], &addr[at + 1..]);
    let atext = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii();
    let dot_atom = |x: &str| !x.is_empty() && x.split('.').all(|p| !p.is_empty() && p.chars().all(atext));
    let local_ok = if local.len() >= 2 && local.starts_with('"') && local.ends_with('"') {
        !local[1..local.len() - 1]
            .chars()
            .any(|c| c == '"' || c.is_control())
    } else {
        dot_atom(local)
    };
    let domain_ok = if domain.starts_with('[') && domain.ends_with(']') {
        domain.len() > 2
    } else {
        dot_atom(domain)
    };
    local_ok && domain_ok
}

fn valid_display_name(name: &str) -> bool {
    if name.len() >= 2 && name.starts_with('"') && name.ends_with('"') {
        return true;
    }
    name.split_whitespace().all(|w| {
        w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c) || !c.is_ascii())
    })
}

/// The forked pre-Go-1.17 `net.ParseIP` that allows leading zeros in IPv4 parts. Returns the
/// address length in bytes (4 or 16).
fn parse_ip_sloppy(s: &str) -> Option<usize> {
    for c in s.chars() {
        match c {
            '.' => return parse_ipv4_sloppy(s).map(|_| 4),
            ':' => return parse_ipv6_sloppy(s).map(|_| 16),
            _ => {}
        }
    }
    None
}

fn parse_ipv4_sloppy(s: &str) -> Option<[u8; 4]> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut out = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut n: u32 = 0;
        for b in p.bytes() {
            n = n * 10 + u32::from(b - b'0');
            if n >= 0xFF_FFFF {
                return None;
            }
        }
        out[i] = u8::try_from(n).ok()?;
    }
    Some(out)
}

fn parse_ipv6_sloppy(s: &str) -> Option<Ipv6Addr> {
    if let Ok(a) = s.parse::<Ipv6Addr>() {
        return Some(a);
    }
    // An embedded IPv4 tail with leading zeros: normalize it and retry.
    let i = s.rfind(':')?;
    let v4 = parse_ipv4_sloppy(&s[i + 1..])?;
    format!("{}{}.{}.{}.{}", &s[..=i], v4[0], v4[1], v4[2], v4[3])
        .parse()
        .ok()
}

/// `ParseCIDRSloppy`: `ip/prefix` with the prefix within the address length.
fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Some(len) = parse_ip_sloppy(ip) else {
        return false;
    };
    if bits.is_empty() || !bits.bytes().all(|b| b.is_ascii_digit()) || bits.len() > 3 {
        return false;
    }
    bits.parse::<usize>().map(|n| n <= len * 8).unwrap_or(false)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx..`, `xx-xx..` or `xxxx.xxxx..`.
fn is_mac(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    let hex2 = |x: &[u8]| x.len() == 2 && x.iter().all(|c| c.is_ascii_hexdigit());
    if b[2] == b':' || b[2] == b'-' {
        if !(b.len() + 1).is_multiple_of(3) {
            return false;
        }
        let n = (b.len() + 1) / 3;
        if n != 6 && n != 8 && n != 20 {
            return false;
        }
        (0..n).all(|i| {
            let x = i * 3;
            hex2(&b[x..x + 2]) && (i == n - 1 || b[x + 2] == b[2])
        })
    } else if b[4] == b'.' {
        if !(b.len() + 1).is_multiple_of(5) {
            return false;
        }
        let n = 2 * (b.len() + 1) / 5;
        if n != 6 && n != 8 && n != 20 {
            return false;
        }
        (0..n / 2).all(|i| {
            let x = i * 5;
            hex2(&b[x..x + 2]) && hex2(&b[x + 2..x + 4]) && (i == n / 2 - 1 || b[x + 4] == b'.')
        })
    } else {
        false
    }
}

fn is_isbn(s: &str, version: u32) -> bool {
    let sanitized: Vec<u8> = s
        .bytes()
        .filter(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' | b'-'))
        .collect();
    let digit = |b: u8| u32::from(b.wrapping_sub(b'0'));
    if version == 10 {
        let ok = sanitized.len() == 10
            && sanitized[..9].iter().all(u8::is_ascii_digit)
            && (sanitized[9].is_ascii_digit() || sanitized[9] == b'X');
        if !ok {
            return false;
        }
        let mut sum: u32 = (0..9).map(|i| (i as u32 + 1) * digit(sanitized[i])).sum();
        sum += if sanitized[9] == b'X' {
            100
        } else {
            10 * digit(sanitized[9])
        };
        sum.is_multiple_of(11)
    } else {
        if sanitized.len() != 13 || !sanitized.iter().all(u8::is_ascii_digit) {
            return false;
        }
        let sum: u32 = (0..12)
            .map(|i| if i % 2 == 0 { 1 } else { 3 } * digit(sanitized[i]))
            .sum();
        digit(sanitized[12]) == (10 - sum % 10) % 10
    }
}

fn is_credit_card(s: &str) -> bool {
    static CARD: OnceLock<Regex> = OnceLock::new();
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    let pattern = r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$";
    if !re(&CARD, pattern).is_match(&digits) {
        return false;
    }
    let mut sum = 0u32;
    for (i, b) in digits.bytes().rev().enumerate() {
        let mut d = u32::from(b - b'0');
        if i % 2 == 1 {
            d *= 2;
            if d >= 10 {
                d = d % 10 + 1;
            }
        }
        sum += d;
    }
    sum.is_multiple_of(10)
}

/// Go's `time.Parse("2006-01-02", s)`.
pub(crate) fn is_date(s: &str) -> bool {
    parse_date(s).is_some()
}

/// Parses `YYYY-MM-DD` strictly (Go's layout needs exactly these digits and a real day).
pub(crate) fn parse_date(s: &str) -> Option<(i64, u32, u32)> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = &s[r];
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let year = num(0..4)?;
    let month = num(5..7)?;
    let day = num(8..10)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(i64::from(year), month) {
        return None;
    }
    Some((i64::from(year), month, day))
}

pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// kube-openapi's `IsDateTime`: a valid date, a `t`, and `hh:mm:ss[.frac](z|±hh:mm)`.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let re = re(
        &DATETIME,
        r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$",
    );
    let Some(m) = re.captures(parts[1]) else {
        return false;
    };
    let g = |i: usize| m.get(i).map(|x| x.as_str()).unwrap_or("");
    g(1) <= "23" && g(2) <= "59" && g(3) <= "59"
}

/// kube-openapi's `ParseDuration`: Go's `time.ParseDuration`, or Scala-style `3 days`.
fn is_duration(s: &str) -> bool {
    if go_parse_duration(s) {
        return true;
    }
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let part = re(&DURATION_PART, r"(([0-9]+)[\t\n\f\r ]*([A-Za-zµ]+))");
    let mut ok = false;
    for caps in part.captures_iter(s) {
        let digits = caps.get(2).map(|m| m.as_str()).unwrap_or("");
        if digits.parse::<i64>().is_err() {
            return false;
        }
        let unit = caps
            .get(3)
            .map(|m| m.as_str().trim().to_lowercase())
            .unwrap_or_default();
        for variants in UNITS {
            let last = variants.len() - 1;
            for (i, v) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(v)) || v.eq_ignore_ascii_case(&unit) {
                    ok = true;
                }
            }
        }
    }
    ok
}

/// Go's `time.ParseDuration` grammar: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`.
fn go_parse_duration(s: &str) -> bool {
    let mut rest = s.strip_prefix(['-', '+']).unwrap_or(s);
    if rest == "0" {
        return true;
    }
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut i = int_len;
        let mut frac_len = 0;
        if rest.as_bytes().get(i) == Some(&b'.') {
            i += 1;
            frac_len = rest[i..].bytes().take_while(u8::is_ascii_digit).count();
            i += frac_len;
        }
        if int_len == 0 && frac_len == 0 {
            return false;
        }
        rest = &rest[i..];
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        if !matches!(unit, "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h") {
            return false;
        }
        rest = &rest[unit_len..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_set() {
        assert!(is_supported("date-time"));
        assert!(is_supported("datetime"));
        assert!(is_supported("byte"));
        assert!(!is_supported("int-or-string"));
        assert!(!is_supported("k8s-short-name"));
        assert!(validates("unknown-format", "anything"));
    }

    #[test]
    fn table() {
        let cases: &[(&str, &str, bool)] = &[
            ("date-time", "2024-01-02T03:04:05Z", true),
            ("date-time", "2024-01-02T03:04:05.123+01:00", true),
            ("date-time", "2024-01-02t03:04:05z", true),
            ("date-time", "2024-02-30T03:04:05Z", false),
            ("date-time", "2024-01-02T24:04:05Z", false),
            ("date-time", "2024-01-02 03:04:05Z", false),
            ("date-time", "yesterday", false),
            ("date", "2024-02-29", true),
            ("date", "2023-02-29", false),
            ("date", "2024-1-02", false),
            ("duration", "1h30m", true),
            ("duration", "-1.5s", true),
            ("duration", "0", true),
            ("duration", "3 days", true),
            ("duration", "10 seconds", true),
            ("duration", "1y", false),
            ("duration", "", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "aGVsbG8", false),
            ("byte", "", false),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "123E4567E89B12D3A456426614174000", true),
            ("uuid", "123e4567-e89b-12d3-a456", false),
            ("uuid4", "123e4567-e89b-42d3-a456-426614174000", true),
            ("uuid4", "123e4567-e89b-12d3-a456-426614174000", false),
            ("hostname", "example.com", true),
            ("hostname", "localhost", true),
            ("hostname", "a-b", true),
            ("hostname", "ab-c", false),
            ("hostname", "-a", false),
            ("hostname", "my-host.example.com", true),
            ("hostname", "example.c0m", false),
            ("hostname", "exa mple.com", false),
            ("ipv4", "10.0.0.1", true),
            ("ipv4", "010.000.000.001", true),
            ("ipv4", "256.0.0.1", false),
            ("ipv4", "::ffff:1.2.3.4", true),
            ("ipv4", "::1", false),
            ("ipv6", "::1", true),
            ("ipv6", "fe80::1", true),
            ("ipv6", "10.0.0.1", false),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("cidr", "fd00::/64", true),
            ("cidr", "10.0.0.0", false),
            ("mac", "00:00:5e:00:53:01", true),
            ("mac", "00-00-5e-00-53-01", true),
            ("mac", "0000.5e00.5301", true),
            ("mac", "00:00:5e:00:53", false),
            ("mac", "00:00:5e-00:53:01", false),
            ("uri", "https://example.com/a?b=c", true),
            ("uri", "/relative/path", true),
            ("uri", "mailto:a@b.c", true),
            ("uri", "relative", false),
            ("uri", "http://exa mple.com", false),
            ("uri", "http://example.com/%zz", false),
            ("uri", "http://example.com:80x/", false),
            ("email", "a@b.c", true),
            ("email", "Jane <jane@example.com>", true),
            ("email", "not-an-email", false),
            ("email", "a@", false),
            ("isbn10", "0321751043", true),
            ("isbn10", "0321751044", false),
            ("isbn13", "978-0321751041", true),
            ("isbn", "978-0321751041", true),
            ("creditcard", "4111 1111 1111 1111", true),
            ("creditcard", "4111 1111 1111 1112", false),
            ("ssn", "123-45-6789", true),
            ("ssn", "123456789", false),
            ("hexcolor", "#fff", true),
            ("hexcolor", "#ffff", false),
            ("rgbcolor", "rgb(255, 0, 10)", true),
            ("rgbcolor", "rgb(256,0,0)", false),
            ("bsonobjectid", "507f1f77bcf86cd799439011", true),
            ("bsonobjectid", "507f1f77bcf86cd79943901", false),
            ("password", "", true),
        ];
        for (format, value, want) in cases {
            assert_eq!(validates(format, value), *want, "{format} {value:?}");
        }
    }
}
