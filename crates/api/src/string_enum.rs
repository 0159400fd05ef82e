//! `string_enum!`: Karmada's string-typed enums (`Always|Never`, `Lazy`, ...) as Rust enums that
//! still hold values this version does not know.
//!
//! Go's Karmada types are plain strings with a `+kubebuilder:validation:Enum`. A Rust enum that
//! refused unknown values would make one bad (or newer) object fail a whole typed list and hide
//! the value from the error message. Instead every enum has an `Other(String)` variant:
//! deserialization never fails on the value, serialization writes it back unchanged, and
//! [`crate::validation`] reports it with the field path and the accepted values. The generated
//! JSON schema still carries `enum: [...]`, so an API server rejects unknown values up front.

/// Defines a string-valued enum with an `Other(String)` catch-all; see the module docs.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this version of flotilla does not know; `validate()` reports it.
            Other(String),
        }

        impl $name {
            /// Every value this version knows, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$($value),+];

            /// The value as written in YAML.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $value, )+
                    Self::Other(other) => other,
                }
            }

            /// Whether this is one of [`Self::KNOWN`].
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Other(_))
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                match value {
                    $( $value => Self::$variant, )+
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                // Read from the input in place: a known value allocates nothing (a
                // `Cow<str>` would be an owned `String` for every value read).
                struct Visitor;
                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $name;

                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a string")
                    }

                    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<$name, E> {
                        Ok($name::from(value))
                    }
                }
                deserializer.deserialize_str(Visitor)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "enum": [$($value),+],
                })
            }
        }
    };
}
