//! Tags: the list, create, rename and delete.

use super::*;

impl BlogServiceImpl {
    pub(super) async fn list_tags(&self) -> Result<Vec<Tag>, BlogError> {
        let mut pooled = self.pool.read().await?;
        let mut rows = store::list_tags(&mut pooled.conn()).await?;
        rows.sort_by(tag_order);
        Ok(rows.into_iter().map(Tag::from).collect())
    }

    pub(super) async fn create_tag(&self, input: NewTag) -> Result<Tag, BlogError> {
        let mut check = Checker::default();
        let name = match &input.name {
            Some(n) => check.tag_name("name", n),
            None => {
                check.fail("name", "name is required");
                String::new()
            }
        };
        let slug = match given(&input.slug) {
            Some(s) => check.tag_slug("slug", s),
            None => slugify(&name, TAG_SLUG_MAX),
        };
        done(check, ())?;
        let key = tag_name_key(&name);
        let now = kernel::time::now();
        let result = write_tx!(&self.pool, BlogError, |tx| {
            if store::find_tag_clash(tx, &key, &slug, None)
                .await?
                .is_some()
            {
                return Err(BlogError::TagTaken(slug.clone()));
            }
            let new = NewTagRow {
                name: &name,
                name_key: &key,
                slug: &slug,
                created_at: now,
            };
            Ok(Tag::from(store::insert_tag(tx, &new).await?))
        });
        match result {
            Err(BlogError::Db(e)) if e.is_unique_violation() => Err(BlogError::TagTaken(slug)),
            other => other,
        }
    }

    pub(super) async fn update_tag(&self, id: i64, patch: TagPatch) -> Result<Tag, BlogError> {
        let mut check = Checker::default();
        let name = patch.name.as_deref().map(|n| check.tag_name("name", n));
        let slug = given(&patch.slug).map(|s| check.tag_slug("slug", s));
        done(check, ())?;
        let key = name.as_deref().map(tag_name_key);
        let result = write_tx!(&self.pool, BlogError, |tx| {
            let current = store::find_tag(tx, id)
                .await?
                .ok_or(BlogError::TagNotFound)?;
            if name.is_none() && slug.is_none() {
                return Ok(Tag::from(current));
            }
            let new_key = key.clone().unwrap_or_else(|| current.name_key.clone());
            let new_slug = slug.clone().unwrap_or_else(|| current.slug.clone());
            if store::find_tag_clash(tx, &new_key, &new_slug, Some(id))
                .await?
                .is_some()
            {
                return Err(BlogError::TagTaken(new_slug));
            }
            let changes = TagChanges {
                name: name.as_deref(),
                name_key: key.as_deref(),
                slug: slug.as_deref(),
            };
            let row = store::update_tag(tx, id, &changes)
                .await?
                .ok_or(BlogError::TagNotFound)?;
            Ok(Tag::from(row))
        });
        match result {
            Err(BlogError::Db(e)) if e.is_unique_violation() => {
                Err(BlogError::TagTaken(slug.unwrap_or_default()))
            }
            other => other,
        }
    }

    pub(super) async fn delete_tag(&self, id: i64) -> Result<(), BlogError> {
        let deleted = write_tx!(&self.pool, BlogError, |tx| Ok(
            store::delete_tag(tx, id).await?
        ))?;
        if deleted == 0 {
            Err(BlogError::TagNotFound)
        } else {
            Ok(())
        }
    }
}
