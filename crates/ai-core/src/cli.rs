//! `keel ai ...`: an interactive chat in the terminal, or one question from a script, through the
//! same service as the API.

use std::io::Write as _;
use std::sync::Arc;

use clap::{ArgMatches, FromArgMatches, Subcommand};
use futures_util::StreamExt;
use tokio::io::AsyncBufReadExt;

use crate::budget::Caller;
use crate::providers::StreamItem;
use crate::service::{AiService, DEFAULT_USER};

/// The command's name: `keel ai`.
pub const COMMAND: &str = "ai";

#[derive(Debug, Subcommand)]
pub enum AiCommand {
    /// Chat in the terminal: each line is a message, replies print as they stream in.
    Chat {
        /// A provider other than AI_PROVIDER.
        #[arg(long)]
        provider: Option<String>,
        /// A model other than AI_MODEL.
        #[arg(long)]
        model: Option<String>,
    },
    /// Ask one question and print the reply.
    Ask {
        question: String,
        #[arg(long)]
        provider: Option<String>,
        #[arg(long)]
        model: Option<String>,
    },
}

/// `keel ai`.
pub fn command() -> clap::Command {
    AiCommand::augment_subcommands(
        clap::Command::new(COMMAND)
            .about("Chat with the configured AI provider")
            .subcommand_required(true),
    )
}

/// Runs `keel ai <matches>`; `service_for` builds the service for another provider or model.
pub async fn run(
    service_for: impl Fn(Option<String>, Option<String>) -> Result<Arc<dyn AiService>, String>,
    matches: &ArgMatches,
) -> Result<(), String> {
    match AiCommand::from_arg_matches(matches).map_err(|e| e.to_string())? {
        AiCommand::Ask {
            question,
            provider,
            model,
        } => {
            let service = service_for(provider, model)?;
            let turn = service
                .prepare(&Caller::operator(DEFAULT_USER), Some(question), None)
                .await
                .map_err(|e| e.to_string())?;
            let (provider, model) = (turn.provider.clone(), turn.model.clone());
            let reply = service.chat(turn).await.map_err(|e| e.to_string())?;
            if reply.provider != provider || reply.model != model {
                eprintln!("(answered by {} ({}))", reply.provider, reply.model);
            }
            println!("{}", reply.content);
        }
        AiCommand::Chat { provider, model } => {
            let service = service_for(provider, model)?;
            let config = service.config();
            eprintln!(
                "Chatting with {} ({}). An empty line or Ctrl-D ends it.",
                config.provider.name,
                config.model_for(config.provider)
            );
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            let mut conversation: Option<String> = None;
            loop {
                eprint!("> ");
                let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? else {
                    break;
                };
                if line.trim().is_empty() {
                    break;
                }
                match ask_streaming(&*service, line, conversation.clone()).await {
                    Ok(id) => conversation = Some(id),
                    Err(e) => eprintln!("{e}"),
                }
            }
        }
    }
    Ok(())
}

/// Prints the reply as it streams in; the conversation's id.
async fn ask_streaming(
    service: &dyn AiService,
    message: String,
    conversation: Option<String>,
) -> Result<String, String> {
    let mut turn = service
        .prepare(&Caller::operator(DEFAULT_USER), Some(message), conversation)
        .await
        .map_err(|e| e.to_string())?;
    let opened = service
        .open_stream(&turn)
        .await
        .map_err(|e| e.to_string())?;
    if opened.provider != turn.provider || opened.model != turn.model {
        eprintln!("(answered by {} ({}))", opened.provider, opened.model);
    }
    turn.provider = opened.provider;
    turn.model = opened.model;
    let mut stream = opened.stream;
    let mut out = std::io::stdout();
    while let Some(item) = stream.next().await {
        match item.map_err(|e| format!("AI provider error: {e}"))? {
            StreamItem::Delta(text) => {
                let _ = write!(out, "{text}");
                let _ = out.flush();
            }
            StreamItem::Final(completion) => {
                let _ = writeln!(out);
                let id = turn.conversation_id.clone();
                service
                    .finish(turn, &completion)
                    .await
                    .map_err(|e| e.to_string())?;
                return Ok(id);
            }
        }
    }
    Err("AI provider error: the stream ended without a reply".to_owned())
}
