//! Which signatures a source must carry before Tether applies it: one
//! vocabulary for the source that checks them and for the importers that
//! translate another tool's setting into it.

crate::vocabulary! {
    /// Which signatures a source must carry (`spec.source.verify.mode`).
    #[derive(Default)]
    pub enum VerifyMode("verification mode") {
        /// No signature is required.
        #[default]
        None = "none",
        /// The commit must be signed by a trusted key.
        Head = "head",
        /// The revision must be an annotated tag signed by a trusted key.
        Tag = "tag",
        /// Both the tag and the commit it points to must be signed.
        TagAndHead = "tag-and-head",
        /// A chart's Helm provenance (`.prov`) must be signed by a trusted
        /// OpenPGP key and name the archive's digest. Charts only.
        Provenance = "provenance",
    }
}
