"use strict";
(async function () {
  const app = document.getElementById("app");
  const answer = await (await fetch("api/sessions")).json();
  const list = document.createElement("ul");
  for (const row of answer.data || []) {
    const item = document.createElement("li");
    item.textContent = row.id + " " + row.status;
    list.appendChild(item);
  }
  app.appendChild(list);
})();
