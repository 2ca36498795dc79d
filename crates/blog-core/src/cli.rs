//! `keel blog ...`: export and import from the command line, through the same service as the API
//! (talks to the database directly).

use std::path::PathBuf;
use std::sync::Arc;

use clap::{ArgMatches, FromArgMatches, Subcommand};

use crate::domain::export::ExportFormat;
use crate::domain::post::PostStatus;
use crate::service::{BlogService, ExportOptions, ImportOptions, ImportProgress, OnConflict};

/// The command's name: `keel blog`.
pub const COMMAND: &str = "blog";

#[derive(Debug, Subcommand)]
pub enum BlogCommand {
    /// Write every post (or those of one status) to a file: a zip of Markdown files or a JSON array.
    Export {
        /// markdown or json.
        #[arg(long, default_value = "markdown")]
        format: String,
        /// Where to write the export.
        #[arg(long)]
        out: PathBuf,
        /// Only posts of this status: draft, published or archived.
        #[arg(long)]
        status: Option<String>,
    },
    /// Read posts from a .md, .markdown, .zip or .json file.
    Import {
        file: PathBuf,
        /// What to do with a post whose slug exists: skip, overwrite or fail (nothing kept).
        #[arg(long, default_value = "skip")]
        on_conflict: String,
    },
}

/// `keel blog`.
pub fn command() -> clap::Command {
    BlogCommand::augment_subcommands(
        clap::Command::new(COMMAND)
            .about("Export and import blog posts (talks to the database directly)")
            .subcommand_required(true),
    )
}

/// Runs `keel blog <matches>`.
pub async fn run(service: &dyn BlogService, matches: &ArgMatches) -> Result<(), String> {
    match BlogCommand::from_arg_matches(matches).map_err(|e| e.to_string())? {
        BlogCommand::Export {
            format,
            out,
            status,
        } => {
            let format = ExportFormat::parse(&format)
                .ok_or_else(|| format!("unknown format {format:?}: use markdown or json"))?;
            let status = match status {
                None => None,
                Some(raw) => Some(PostStatus::parse(&raw).ok_or_else(|| {
                    format!("unknown status {raw:?}: use draft, published or archived")
                })?),
            };
            let posts = service
                .export_to_path(ExportOptions { format, status }, &out)
                .await
                .map_err(|e| e.to_string())?;
            println!("exported {posts} posts to {}", out.display());
        }
        BlogCommand::Import { file, on_conflict } => {
            let on_conflict = OnConflict::parse(&on_conflict).ok_or_else(|| {
                format!("unknown --on-conflict {on_conflict:?}: use skip, overwrite or fail")
            })?;
            // Drawn on stderr when it is a terminal; hidden otherwise.
            let bar = indicatif::ProgressBar::new(0).with_style(
                indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} posts ({eta} left)")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let progress_bar = bar.clone();
            let options = ImportOptions {
                on_conflict,
                progress: Some(Arc::new(move |p: ImportProgress| {
                    progress_bar.set_length(p.total as u64);
                    progress_bar.set_position(p.processed as u64);
                })),
                ..Default::default()
            };
            let outcome = service.import_path(&file, options).await;
            bar.finish_and_clear();
            let result = outcome.map_err(|e| e.to_string())?;
            println!(
                "imported {}: {} created, {} updated, {} skipped, {} failed",
                file.display(),
                result.created,
                result.updated,
                result.skipped,
                result.failed
            );
            for e in &result.errors {
                println!(
                    "  {} ({}): {}",
                    e.file,
                    if e.slug.is_empty() { "-" } else { &e.slug },
                    e.message
                );
            }
        }
    }
    Ok(())
}
