// Forms marked data-autosubmit send themselves when a field changes (no inline handlers:
// the Content-Security-Policy allows scripts from our own files only).
document.addEventListener("change", function (event) {
  var form = event.target.form;
  if (form && form.hasAttribute("data-autosubmit")) form.submit();
});
