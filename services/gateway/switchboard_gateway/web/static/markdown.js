// The web pages' Markdown renderer (GET /web/markdown.js, public): a model's or a user's text as
// a DocumentFragment. marked parses it (GitHub's flavour: tables, fenced code), raw HTML in the
// text is shown as text, DOMPurify sanitises what marked made (no scripts, no event handlers, no
// style attributes, no forms or frames; only http(s) and mailto links, which open in a new tab
// without an opener), and highlight.js colours the code blocks, each with a Copy button.
//
//   import { renderMarkdown } from "/web/markdown.js";
//   element.replaceChildren(renderMarkdown(text));
//
// Style sheets: /web/markdown.css (tables, code blocks, the button) and one of the vendored
// highlight.js themes (/web/vendor/hljs/github.min.css, github-dark.min.css).

import { Marked } from "/web/vendor/marked.esm.js";
import DOMPurify from "/web/vendor/purify.es.mjs";
import hljs from "/web/vendor/hljs/core.min.js";
import bash from "/web/vendor/hljs/bash.min.js";
import css from "/web/vendor/hljs/css.min.js";
import diff from "/web/vendor/hljs/diff.min.js";
import dockerfile from "/web/vendor/hljs/dockerfile.min.js";
import go from "/web/vendor/hljs/go.min.js";
import ini from "/web/vendor/hljs/ini.min.js";
import java from "/web/vendor/hljs/java.min.js";
import javascript from "/web/vendor/hljs/javascript.min.js";
import json from "/web/vendor/hljs/json.min.js";
import markdown from "/web/vendor/hljs/markdown.min.js";
import python from "/web/vendor/hljs/python.min.js";
import rust from "/web/vendor/hljs/rust.min.js";
import shell from "/web/vendor/hljs/shell.min.js";
import sql from "/web/vendor/hljs/sql.min.js";
import typescript from "/web/vendor/hljs/typescript.min.js";
import xml from "/web/vendor/hljs/xml.min.js";
import yaml from "/web/vendor/hljs/yaml.min.js";

const LANGUAGES = {
  bash, css, diff, dockerfile, go, ini, java, javascript, json, markdown, python, rust, shell,
  sql, typescript, xml, yaml,
};
for (const [name, grammar] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, grammar);

const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);
const COPIED_MS = 2000;

const escapeHtml = (text) =>
  String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

// Raw HTML in the text is shown as the text it is; a Markdown image becomes a link to it (the
// pages load images from their own origin only).
const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    html({ text }) {
      return escapeHtml(text);
    },
    image({ href, text }) {
      return `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`;
    },
  },
});

// An instance of its own: its hook and settings do not change a page's other DOMPurify uses.
const purify = DOMPurify(window);
const CONFIG = {
  RETURN_DOM_FRAGMENT: true,
  ALLOW_DATA_ATTR: false,
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
  FORBID_ATTR: ["style", "srcset", "action", "formaction"],
  FORBID_TAGS: [
    "style", "form", "input", "button", "textarea", "select", "option", "iframe", "frame",
    "frameset", "object", "embed", "svg", "math", "img", "video", "audio", "source", "picture",
    "link", "meta", "base", "template",
  ],
};

function safeHref(href) {
  try {
    return SAFE_SCHEMES.has(new URL(href, window.location.href).protocol);
  } catch {
    return false;
  }
}

purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName !== "A") return;
  const href = node.getAttribute("href");
  if (href === null) return;
  if (!safeHref(href)) {
    node.removeAttribute("href");
    return;
  }
  node.setAttribute("target", "_blank");
  node.setAttribute("rel", "noopener noreferrer");
});

function languageOf(code) {
  for (const name of code.classList) {
    if (name.startsWith("language-")) return name.slice("language-".length);
  }
  return "";
}

function copyButton(code) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "md-copy";
  button.textContent = "Copy";
  button.setAttribute("aria-label", "Copy code");
  let timer = null;
  const show = (label, state) => {
    button.textContent = label;
    button.setAttribute("aria-label", label === "Copy" ? "Copy code" : label);
    if (state) button.dataset.state = state;
    else delete button.dataset.state;
  };
  button.addEventListener("click", async () => {
    clearTimeout(timer);
    try {
      await navigator.clipboard.writeText(code.textContent);
      show("Copied", "copied");
    } catch (err) {
      show("Copy failed", "failed");
      console.warn("copy failed:", err);
    }
    timer = setTimeout(() => show("Copy", null), COPIED_MS);
  });
  return button;
}

// highlight.js escapes the code it is given; its markup (spans with classes) is sanitised
// again all the same before it replaces the code's text.
function highlight(code) {
  const language = languageOf(code);
  code.classList.add("hljs");
  if (!language || !hljs.getLanguage(language)) return;
  const result = hljs.highlight(code.textContent, { language, ignoreIllegals: true });
  code.replaceChildren(purify.sanitize(result.value, CONFIG));
}

function decorateCode(fragment) {
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    if (!code) continue;
    highlight(code);
    const box = document.createElement("div");
    box.className = "md-code";
    const head = document.createElement("div");
    head.className = "md-code-head";
    const label = document.createElement("span");
    label.className = "md-lang";
    label.textContent = languageOf(code) || "text";
    head.append(label, copyButton(code));
    pre.replaceWith(box);
    box.append(head, pre);
  }
}

function decorateTables(fragment) {
  for (const table of fragment.querySelectorAll("table")) {
    const box = document.createElement("div");
    box.className = "md-table"; // scrolls sideways on a narrow screen, not the page
    table.replaceWith(box);
    box.append(table);
  }
}

function trim(fragment) {
  const blank = (node) => node && node.nodeType === Node.TEXT_NODE && !node.data.trim();
  while (blank(fragment.firstChild)) fragment.firstChild.remove();
  while (blank(fragment.lastChild)) fragment.lastChild.remove();
}

/**
 * @param {string} text Markdown
 * @returns {DocumentFragment} sanitised, highlighted; safe to insert
 */
export function renderMarkdown(text) {
  const html = marked.parse(String(text ?? ""), { async: false });
  const fragment = purify.sanitize(html, CONFIG);
  decorateCode(fragment);
  decorateTables(fragment);
  trim(fragment);
  return fragment;
}
