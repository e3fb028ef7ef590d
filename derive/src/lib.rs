//! `#[derive(Entity)]` for sequence-guard, re-exported as
//! `sequence_guard::Entity`: the kind, the sequence and the last event's id
//! of an entity, from its attribute and its fields.
//!
//! ```ignore
//! #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Entity)]
//! #[serde(rename_all = "camelCase")]
//! #[entity(kind = "ACCOUNT")]                 // optional: summary = "line",
//!                                             // personal("holderName"), placeholder = "(erased)"
//! pub struct Account {
//!     pub sequence: u64,                      // read by the guard's condition
//!     pub last_event_id: String,              // the event at `sequence`
//!     pub balance_cents: i64,
//! }
//! ```
//!
//! It writes `impl sequence_guard::Entity for Account` with `KIND`,
//! `sequence()` and `last_event_id()` and, given `summary = "line"`,
//! `summary()` calling the entity's own `fn line(&self) -> String`; given
//! `personal("holderName")` (attribute names, as serde writes them),
//! `PERSONAL`, and given `placeholder = "..."`, `PLACEHOLDER` (what
//! erasure writes in their place; `Domain::check` finds a name the struct
//! does not have). The kind
//! is checked here, when the crate compiles: upper-case letters, digits and
//! `_`, neither `MESSAGE` nor `PARKED` (the engine's own items). An entity
//! whose fields are named otherwise implements `Entity` by hand.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::{Data, DeriveInput, Fields, Ident, LitStr, parse_macro_input};

/// The kinds the engine's own items use.
const RESERVED: [&str; 2] = ["MESSAGE", "PARKED"];

/// `#[derive(Entity)]`: see the crate's documentation.
#[proc_macro_derive(Entity, attributes(entity))]
pub fn derive_entity(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// What `#[entity(...)]` says.
struct Options {
    kind: LitStr,
    summary: Option<Ident>,
    /// `personal("customerName", "email")`: the attributes erasure replaces.
    personal: Vec<LitStr>,
    /// `placeholder = "..."`: what they hold once erased.
    placeholder: Option<LitStr>,
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let options = options(input)?;
    check_fields(input)?;
    let name = &input.ident;
    let kind = &options.kind;
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    let personal = &options.personal;
    let personal = (!personal.is_empty()).then(|| {
        quote! {
            const PERSONAL: &'static [&'static str] = &[#(#personal),*];
        }
    });
    let placeholder = options.placeholder.as_ref().map(|text| {
        quote! {
            const PLACEHOLDER: &'static str = #text;
        }
    });
    let summary = options.summary.map(|method| {
        quote! {
            fn summary(&self) -> ::std::string::String {
                Self::#method(self)
            }
        }
    });
    Ok(quote! {
        impl #impl_generics ::sequence_guard::Entity for #name #type_generics #where_clause {
            const KIND: &'static str = #kind;
            #personal
            #placeholder

            fn sequence(&self) -> u64 {
                self.sequence
            }

            fn last_event_id(&self) -> &str {
                &self.last_event_id
            }

            #summary
        }
    })
}

/// Reads `#[entity(kind = "...", summary = "...")]`.
fn options(input: &DeriveInput) -> syn::Result<Options> {
    let mut kind: Option<LitStr> = None;
    let mut summary: Option<Ident> = None;
    let mut personal: Vec<LitStr> = Vec::new();
    let mut placeholder: Option<LitStr> = None;
    for attribute in input.attrs.iter().filter(|a| a.path().is_ident("entity")) {
        attribute.parse_nested_meta(|meta| {
            if meta.path.is_ident("kind") {
                kind = Some(meta.value()?.parse()?);
                Ok(())
            } else if meta.path.is_ident("summary") {
                let method: LitStr = meta.value()?.parse()?;
                summary = Some(method.parse()?);
                Ok(())
            } else if meta.path.is_ident("personal") {
                let content;
                syn::parenthesized!(content in meta.input);
                let names = content.parse_terminated(
                    |input: syn::parse::ParseStream<'_>| input.parse::<LitStr>(),
                    syn::Token![,],
                )?;
                personal.extend(names);
                Ok(())
            } else if meta.path.is_ident("placeholder") {
                placeholder = Some(meta.value()?.parse()?);
                Ok(())
            } else {
                Err(meta.error(
                    "expected `kind = \"KIND\"`, `summary = \"method\"`, `personal(\"field\", ...)` or `placeholder = \"text\"`",
                ))
            }
        })?;
    }
    let Some(kind) = kind else {
        return Err(syn::Error::new(
            Span::call_site(),
            "#[derive(Entity)] needs the kind, the prefix of the item's key: #[entity(kind = \"ORDER\")]",
        ));
    };
    check_kind(&kind)?;
    Ok(Options {
        kind,
        summary,
        personal,
        placeholder,
    })
}

fn check_kind(kind: &LitStr) -> syn::Result<()> {
    let value = kind.value();
    let valid = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(syn::Error::new(
            kind.span(),
            format!("the kind {value:?} must be upper-case letters, digits and `_` (no `#`)"),
        ));
    }
    if RESERVED.contains(&value.as_str()) {
        return Err(syn::Error::new(
            kind.span(),
            format!("the kind {value:?} is the engine's own; choose another"),
        ));
    }
    Ok(())
}

/// The struct has the fields the generated methods read.
fn check_fields(input: &DeriveInput) -> syn::Result<()> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            Span::call_site(),
            "#[derive(Entity)] is for structs with named fields; implement Entity by hand",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new(
            Span::call_site(),
            "#[derive(Entity)] is for structs with named fields; implement Entity by hand",
        ));
    };
    let has = |name: &str| {
        fields
            .named
            .iter()
            .any(|field| field.ident.as_ref().is_some_and(|ident| ident == name))
    };
    for (field, declaration) in [
        ("sequence", "pub sequence: u64"),
        ("last_event_id", "pub last_event_id: String"),
    ] {
        if !has(field) {
            return Err(syn::Error::new(
                input.ident.span(),
                format!(
                    "#[derive(Entity)] reads the field `{field}`: add `{declaration}`, or implement Entity by hand"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derived(source: &str) -> Result<String, String> {
        let input: DeriveInput = syn::parse_str(source).map_err(|err| err.to_string())?;
        expand(&input)
            .map(|tokens| tokens.to_string())
            .map_err(|err| err.to_string())
    }

    #[test]
    fn a_struct_with_the_guards_fields_gets_its_impl() {
        let tokens = derived(
            r#"#[entity(kind = "ACCOUNT", summary = "line")]
            struct Account { sequence: u64, last_event_id: String, owner: String }"#,
        )
        .expect("derived");
        assert!(
            tokens.contains("impl :: sequence_guard :: Entity for Account"),
            "{tokens}"
        );
        assert!(
            tokens.contains("const KIND : & 'static str = \"ACCOUNT\""),
            "{tokens}"
        );
        assert!(tokens.contains("self . sequence"), "{tokens}");
        assert!(tokens.contains("& self . last_event_id"), "{tokens}");
        assert!(tokens.contains("Self :: line (self)"), "{tokens}");
    }

    #[test]
    fn without_summary_the_traits_default_stays() {
        let tokens = derived(
            r#"#[entity(kind = "ITEM")] struct Item { sequence: u64, last_event_id: String }"#,
        )
        .expect("derived");
        assert!(!tokens.contains("fn summary"), "{tokens}");
    }

    #[test]
    fn a_bad_kind_is_refused_naming_the_rule() {
        for (kind, says) in [
            ("order", "upper-case letters"),
            ("ORDER#1", "upper-case letters"),
            ("", "upper-case letters"),
            ("MESSAGE", "the engine's own"),
            ("PARKED", "the engine's own"),
        ] {
            let source = format!(
                "#[entity(kind = {kind:?})] struct E {{ sequence: u64, last_event_id: String }}"
            );
            let err = derived(&source).expect_err(kind);
            assert!(err.contains(says), "{kind}: {err}");
        }
    }

    #[test]
    fn a_missing_kind_field_or_shape_is_refused_with_the_fix() {
        let cases = [
            (
                "struct E { sequence: u64, last_event_id: String }",
                "#[entity(kind = \"ORDER\")]",
            ),
            (
                "#[entity(kind = \"E\")] struct E { last_event_id: String }",
                "add `pub sequence: u64`",
            ),
            (
                "#[entity(kind = \"E\")] struct E { sequence: u64 }",
                "add `pub last_event_id: String`",
            ),
            (
                "#[entity(kind = \"E\")] struct E(u64, String);",
                "named fields",
            ),
            ("#[entity(kind = \"E\")] enum E { A }", "named fields"),
            (
                "#[entity(kind = \"E\", colour = \"red\")] struct E { sequence: u64, last_event_id: String }",
                "expected `kind",
            ),
        ];
        for (source, says) in cases {
            let err = derived(source).expect_err(source);
            assert!(err.contains(says), "{source}: {err}");
        }
    }
}
