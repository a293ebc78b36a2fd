// Put in front of every logged HTML fragment (inline: the fragment's CSP allows nothing else).
// Chromium ignores CSP's `webrtc 'block'`, and WebRTC's STUN packets go around connect-src, so the
// fragment loses the WebRTC constructors, and any frame it creates (whose fresh window would
// have them again) is removed before it loads. A closed shadow root would hide a frame from us, so
// shadow roots come only through attachShadow (watched): HTML parsing that makes them
// (setHTMLUnsafe, parseHTMLUnsafe, document.write) is taken away, and the server renames the
// `shadowrootmode` attribute in the fragment's own markup.
(() => {
  for (const name of ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel", "RTCIceTransport",
    "RTCRtpSender", "RTCRtpReceiver", "RTCSctpTransport", "RTCDtlsTransport"]) {
    try { delete window[name]; } catch (e) { /* not in this browser */ }
  }
  const FRAMES = "iframe, frame, object, embed, portal, fencedframe";
  const sweep = (node) => {
    if (!node.querySelectorAll) return;
    if (node.matches && node.matches(FRAMES)) { node.remove(); return; }
    node.querySelectorAll(FRAMES).forEach((frame) => frame.remove());
    node.querySelectorAll("*").forEach((child) => { if (child.shadowRoot) { watch(child.shadowRoot); sweep(child.shadowRoot); } });
  };
  const watch = (root) => new MutationObserver((records) => {
    for (const record of records) record.addedNodes.forEach(sweep);
  }).observe(root, { childList: true, subtree: true });
  watch(document);
  for (const [owner, name] of [[Element.prototype, "setHTMLUnsafe"], [ShadowRoot.prototype, "setHTMLUnsafe"],
    [Document, "parseHTMLUnsafe"]]) {
    try { delete owner[name]; } catch (e) { /* not in this browser */ }
  }
  for (const name of ["write", "writeln"]) {
    Document.prototype[name] = () => { throw new Error(`document.${name} is not available in a logged fragment`); };
  }
  const attachShadow = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (init) { const root = attachShadow.call(this, init); watch(root); return root; };
})();
