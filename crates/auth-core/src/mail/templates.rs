//! The texts of the account mails: built in, or read at start from the folder named by
//! `AUTH_MAIL_TEMPLATES`, one set of files per kind (`<kind>.subject`, `<kind>.txt`,
//! `<kind>.html`), with `{{placeholder}}`s filled when a mail is sent.

use std::path::Path;

use super::MailKind;

/// The placeholders a template may use.
pub const PLACEHOLDERS: [&str; 5] = ["link", "token", "email", "name", "expires_in"];

/// What the placeholders of one mail stand for.
#[derive(Debug, Clone)]
pub struct Values<'a> {
    /// The page to open, with the token in its query.
    pub link: &'a str,
    /// The token alone, for clients that read it from the mail.
    pub token: &'a str,
    /// The recipient's address.
    pub email: &'a str,
    /// The recipient's full name, else the address.
    pub name: &'a str,
    /// How long the link works, in words (`30 minutes`, `48 hours`).
    pub expires_in: &'a str,
}

impl Values<'_> {
    fn get(&self, name: &str) -> &str {
        match name {
            "link" => self.link,
            "token" => self.token,
            "email" => self.email,
            "name" => self.name,
            "expires_in" => self.expires_in,
            _ => "",
        }
    }
}

/// One kind's texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub subject: String,
    pub text: String,
    pub html: Option<String>,
}

/// A rendered mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub subject: String,
    pub text: String,
    pub html: Option<String>,
}

impl Template {
    /// The texts with `values` filled in: as they are in the subject (on one line) and the text,
    /// HTML-escaped in the HTML.
    pub fn render(&self, values: &Values<'_>) -> Rendered {
        let subject: String = fill(&self.subject, values, false)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        Rendered {
            subject: subject.trim().to_owned(),
            text: fill(&self.text, values, false),
            html: self.html.as_deref().map(|h| fill(h, values, true)),
        }
    }
}

/// Every kind's texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Templates {
    verify_email: Template,
    password_reset: Template,
}

impl Templates {
    /// The built-in texts.
    pub fn builtin() -> Templates {
        Templates {
            verify_email: builtin(MailKind::VerifyEmail),
            password_reset: builtin(MailKind::PasswordReset),
        }
    }

    /// The texts of `folder`, kind by kind: a kind with a `<kind>.txt` there takes its texts
    /// from the folder (`<kind>.subject` else the built-in subject, `<kind>.html` only when
    /// present); a kind without keeps the built-in texts. An unreadable file, an unknown
    /// placeholder or an unclosed `{{` is an error naming the file.
    pub fn load(folder: Option<&Path>) -> Result<Templates, String> {
        let Some(folder) = folder else {
            return Ok(Templates::builtin());
        };
        if !folder.is_dir() {
            return Err(format!("{} is not a folder", folder.display()));
        }
        Ok(Templates {
            verify_email: load_kind(folder, MailKind::VerifyEmail)?,
            password_reset: load_kind(folder, MailKind::PasswordReset)?,
        })
    }

    pub fn get(&self, kind: MailKind) -> &Template {
        match kind {
            MailKind::VerifyEmail => &self.verify_email,
            MailKind::PasswordReset => &self.password_reset,
        }
    }
}

fn load_kind(folder: &Path, kind: MailKind) -> Result<Template, String> {
    let read = |extension: &str| -> Result<Option<String>, String> {
        let path = folder.join(format!("{}.{extension}", kind.name()));
        if !path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        check(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Some(text))
    };
    let Some(text) = read("txt")? else {
        // Checked all the same, so that a stray file with a typo is not silently ignored.
        read("subject")?;
        read("html")?;
        return Ok(builtin(kind));
    };
    Ok(Template {
        subject: read("subject")?
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|| builtin(kind).subject),
        text,
        html: read("html")?,
    })
}

/// `Err` naming the first unknown placeholder or unclosed `{{` of `template`.
pub fn check(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err("a {{ is not closed by }}".to_owned());
        };
        let name = after[..end].trim();
        if !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "unknown placeholder {{{{{name}}}}} (known: {})",
                PLACEHOLDERS.join(", ")
            ));
        }
        rest = &after[end + 2..];
    }
    Ok(())
}

/// `template` with each `{{name}}` replaced by its value (HTML-escaped when `html`).
fn fill(template: &str, values: &Values<'_>, html: bool) -> String {
    let mut out = String::with_capacity(template.len() + 128);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let value = values.get(after[..end].trim());
        if html {
            escape_html(value, &mut out);
        } else {
            out.push_str(value);
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

fn escape_html(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

fn builtin(kind: MailKind) -> Template {
    let (subject, text, html) = match kind {
        MailKind::VerifyEmail => (
            "Verify your e-mail address",
            "Hello {{name}},\n\n\
             Please confirm that {{email}} is your e-mail address by opening this link:\n\n\
             {{link}}\n\n\
             If the link does not open, enter this code where you were asked for it:\n\
             {{token}}\n\n\
             The link works once and expires in {{expires_in}}. If you did not create an \
             account, ignore this mail.\n",
            "<p>Hello {{name}},</p>\n\
             <p>Please confirm that {{email}} is your e-mail address:</p>\n\
             <p><a href=\"{{link}}\">Verify my address</a></p>\n\
             <p>If the link does not open, enter this code where you were asked for it:<br>\
             <code>{{token}}</code></p>\n\
             <p>The link works once and expires in {{expires_in}}. If you did not create an \
             account, ignore this mail.</p>\n",
        ),
        MailKind::PasswordReset => (
            "Reset your password",
            "Hello {{name}},\n\n\
             Someone asked to reset the password of the account {{email}}. To choose a new \
             password, open this link:\n\n\
             {{link}}\n\n\
             If the link does not open, enter this code where you were asked for it:\n\
             {{token}}\n\n\
             The link works once and expires in {{expires_in}}. Choosing a new password signs \
             you out everywhere. If you did not ask for this, ignore this mail: your password \
             stays as it is.\n",
            "<p>Hello {{name}},</p>\n\
             <p>Someone asked to reset the password of the account {{email}}.</p>\n\
             <p><a href=\"{{link}}\">Choose a new password</a></p>\n\
             <p>If the link does not open, enter this code where you were asked for it:<br>\
             <code>{{token}}</code></p>\n\
             <p>The link works once and expires in {{expires_in}}. Choosing a new password signs \
             you out everywhere. If you did not ask for this, ignore this mail: your password \
             stays as it is.</p>\n",
        ),
    };
    Template {
        subject: subject.to_owned(),
        text: text.to_owned(),
        html: Some(html.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn values() -> Values<'static> {
        Values {
            link: "https://app.example.com/reset?token=abc&x=1",
            token: "abc",
            email: "ada@example.com",
            name: "Ada <Lovelace>",
            expires_in: "30 minutes",
        }
    }

    #[test]
    fn placeholders_are_filled_and_escaped_in_html_only() {
        let template = Template {
            subject: "Hi {{ name }}\r\nBcc: x".to_owned(),
            text: "{{name}}: {{link}} ({{expires_in}}) {{token}} {{email}}".to_owned(),
            html: Some("<a href=\"{{link}}\">{{name}}</a>".to_owned()),
        };
        let mail = template.render(&values());
        assert_eq!(mail.subject, "Hi Ada <Lovelace>  Bcc: x");
        assert_eq!(
            mail.text,
            "Ada <Lovelace>: https://app.example.com/reset?token=abc&x=1 (30 minutes) abc \
             ada@example.com"
        );
        assert_eq!(
            mail.html.as_deref(),
            Some(
                "<a href=\"https://app.example.com/reset?token=abc&amp;x=1\">Ada \
                 &lt;Lovelace&gt;</a>"
            )
        );
    }

    #[test]
    fn the_builtin_texts_carry_the_link_and_the_token() {
        let templates = Templates::builtin();
        for kind in [MailKind::VerifyEmail, MailKind::PasswordReset] {
            let template = templates.get(kind);
            assert!(check(&template.text).is_ok() && check(&template.subject).is_ok());
            let mail = template.render(&values());
            assert!(mail.text.contains(values().link), "{kind:?}");
            assert!(mail.text.contains("30 minutes"), "{kind:?}");
            assert!(mail.html.unwrap_or_default().contains("token=abc&amp;x=1"));
        }
    }

    #[test]
    fn unknown_placeholders_and_unclosed_braces_are_refused() {
        assert!(check("{{link}} {{ token }} plain { braces }").is_ok());
        assert!(check("{{password}}").unwrap_err().contains("{{password}}"));
        assert!(check("{{link").is_err());
    }

    #[test]
    fn a_folder_overrides_the_kinds_it_has_files_for() {
        let dir = std::env::temp_dir().join(format!("keel-mail-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("password_reset.txt"), "Reset: {{link}}").unwrap();
        std::fs::write(dir.join("password_reset.subject"), "New password\n").unwrap();
        let templates = Templates::load(Some(&dir)).unwrap();
        let reset = templates.get(MailKind::PasswordReset);
        assert_eq!(reset.subject, "New password");
        assert_eq!(reset.text, "Reset: {{link}}");
        assert_eq!(reset.html, None, "no html file: a text-only mail");
        assert_eq!(
            templates.get(MailKind::VerifyEmail),
            Templates::builtin().get(MailKind::VerifyEmail)
        );
        std::fs::write(dir.join("verify_email.html"), "{{secret}}").unwrap();
        let error = Templates::load(Some(&dir)).unwrap_err();
        assert!(
            error.contains("verify_email.html") && error.contains("{{secret}}"),
            "{error}"
        );
        assert!(Templates::load(Some(&dir.join("missing"))).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
