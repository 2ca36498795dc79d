-- PostgreSQL moved its blog_post_counts triggers from per row to per statement (see its
-- migration of this name). SQLite's triggers are per row only, and there an update rewrites the
-- counts row in place, so nothing changes here.
SELECT 1;
